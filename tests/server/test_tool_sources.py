"""The app's lifespan runs the plugins' tool sources: their tools appear in `/api/tools`
and an agent's tools as the source offers them, and a granted one that vanished stays
granted, marked as not offered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from opencrab.config import Settings
from opencrab.core.tools import tool_id
from opencrab.errors import ConfigError
from opencrab.llm.router import LlmRouter
from opencrab.plugins import plugin_manager
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes import shelf_plugin
from tests.fakes.chat_gateway import MemoryChatPlugin
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.shelf_plugin import BrokenShelf, Label, Shelf
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

PLUGIN = "shelf-plugin-test"


@pytest.fixture
def journal() -> Iterator[list[str]]:
    """The shelf plugin registered with a working and a broken source for one test."""
    entries: list[str] = []
    shelf_plugin.SOURCES[:] = [Shelf("shelf", entries), BrokenShelf("broken", entries)]
    plugin_manager().register(shelf_plugin, name=PLUGIN)
    yield entries
    plugin_manager().unregister(name=PLUGIN)
    shelf_plugin.SOURCES.clear()


def names(rows: list[dict[str, Any]]) -> set[str]:
    return {row["name"] for row in rows}


def test_the_lifespan_runs_the_sources_and_the_api_follows_their_tools(
    settings: Settings, db: Database, scripted: ScriptedProvider, journal: list[str]
) -> None:
    shelf = shelf_plugin.SOURCES[0]
    assert isinstance(shelf, Shelf)
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as client:
        assert journal == ["start shelf", "start broken"]  # the broken one did not stop it
        listed = client.get("/api/tools").json()
        assert {"shelf__count", "shelf__label"} <= names(listed)
        assert not {n for n in names(listed) if n.startswith("broken__")}
        agent = new_agent(client, toolIds=[tool_id("shelf__count")])
        tools = {t["name"]: t for t in client.get(f"/api/agents/{agent['id']}/tools").json()}
        assert (tools["shelf__count"]["granted"], tools["shelf__count"]["offered"]) == (True, True)

        client.portal.call(shelf.offer, [Label()])  # on the app's loop, as the source would
        assert "shelf__count" not in names(client.get("/api/tools").json())
        message = error_of(client.get(f"/api/tools/{tool_id('shelf__count')}"), 404, "not_found")
        assert "tool shelf__count" in message
        assert "not offered now" in message
        tools = {t["name"]: t for t in client.get(f"/api/agents/{agent['id']}/tools").json()}
        assert (tools["shelf__count"]["granted"], tools["shelf__count"]["offered"]) == (True, False)
        got = client.get(f"/api/agents/{agent['id']}").json()
        assert tool_id("shelf__count") in got["toolIds"]  # the grant stays
        page = client.get(f"/agents/{agent['name']}/tools")  # the agent's Tools tab says so
        assert page.status_code == 200
        rows = {
            row.split('"', 1)[0]: row.split("</tr>", 1)[0]
            for row in page.text.split('data-tool="')[1:]
        }
        assert (
            "not offered now: its source does not list it; the grant stays"
            in (rows["shelf__count"])
        )
        assert "not offered now" not in rows["shelf__label"]

        client.portal.call(shelf.offer, [shelf.count])
        assert "shelf__count" in names(client.get("/api/tools").json())
        assert client.get(f"/api/tools/{tool_id('shelf__count')}").json()["name"] == "shelf__count"
    assert journal[-1] == "stop shelf"  # the lifespan stopped it; the broken one never started
    assert "stop broken" not in journal


def test_the_sources_stop_when_a_service_after_them_cannot_start(
    settings: Settings, db: Database, journal: list[str]
) -> None:
    gateways = MemoryChatPlugin(odd=object())  # not a ChatGateway: the lifespan fails
    plugin_manager().register(gateways, name="odd-gateway-test")
    try:
        with (
            pytest.raises(ConfigError, match="'odd' is not a ChatGateway"),
            LocalClient(create_app(settings, db, gateways=True)),
        ):
            pass
    finally:
        plugin_manager().unregister(name="odd-gateway-test")
    assert journal == ["start shelf", "start broken", "stop shelf"]
