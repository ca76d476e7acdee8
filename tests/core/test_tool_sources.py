"""Tool sources registered by a plugin: started before the registry is used, stopped in
reverse order, their changing tools granted, offered and held like any other; a source
that cannot start is logged and offers nothing."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Iterator
from types import ModuleType

import pytest

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.cli.up import serve_without_http
from opencrab.cli.worker import run_worker
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentUpdate
from opencrab.core.agent_tools import agent_tools
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult
from opencrab.core.tool_sources import registered_tool_sources, start_tool_sources
from opencrab.core.tools import offered_tools, tool_id
from opencrab.errors import ConfigError
from opencrab.plugins import plugin_manager
from opencrab.store import Database
from opencrab.store.repositories import tools as tools_repo
from tests.core.conftest import calls, speak
from tests.fakes import shelf_plugin
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.shelf_plugin import BrokenShelf, Label, Shelf

PLUGIN = "shelf-plugin-test"


@pytest.fixture
def plugin() -> Iterator[ModuleType]:
    """The shelf plugin module, registered for one test; the test fills its SOURCES."""
    plugin_manager().register(shelf_plugin, name=PLUGIN)
    yield shelf_plugin
    plugin_manager().unregister(name=PLUGIN)
    shelf_plugin.SOURCES.clear()


def offered(scripted: ScriptedProvider, request: int) -> set[str]:
    return {t.name for t in scripted.requests[request].tools or []}


def outcome(result: TurnResult, name: str) -> tuple[bool, str]:
    (found,) = [a for a in result.actions if a.name == name]
    return found.result.success, found.result.output()


async def test_a_granted_source_tool_follows_the_sources_list_from_turn_to_turn(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, plugin: ModuleType
) -> None:
    shelf = Shelf("shelf", [])
    plugin.SOURCES.append(shelf)
    sources = await start_tool_sources(runtime)
    try:
        assert {"shelf__count", "shelf__label"} <= set(runtime.registry.names())
        stored = {row.name for row in offered_tools(runtime.db, runtime.registry)}
        assert {"shelf__count", "shelf__label"} <= stored  # the tools table has them
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("shelf__count")]))
        count = ("shelf__count", {"item": "jam"})
        scripted.outcomes.clear()
        scripted.then(calls(count), speak("three jars"))

        first = await runtime.chat(agent, "how much jam?")
        assert outcome(first, "shelf__count") == (True, '{"item": "jam", "count": 3}')
        assert shelf.counted == ["jam"]
        assert "shelf__count" in offered(scripted, 0)
        assert "shelf__label" not in offered(scripted, 0)  # offered by the source, not granted

        await shelf.offer([Label()])  # the source dropped `count`
        asked = len(scripted.requests)
        scripted.outcomes.clear()
        scripted.then(calls(count), speak("gone"))
        second = await runtime.chat(agent, "and now?", session_id=first.session_id)
        success, said = outcome(second, "shelf__count")
        assert not success
        assert "'shelf__count' is not offered now: its tool source 'shelf' does not list it" in said
        assert shelf.counted == ["jam"]  # never run
        assert "shelf__count" not in offered(scripted, asked)
        # the grant stays and says so; /api/tools no longer lists the tool
        now = runtime.agents.get(agent.id)
        assert tool_id("shelf__count") in now.tool_ids
        [absent] = [t for t in agent_tools(runtime.db, runtime.registry, now) if t.granted]
        assert (absent.name, absent.offered) == ("shelf__count", False)
        listed = {row.name for row in offered_tools(runtime.db, runtime.registry)}
        assert "shelf__count" not in listed
        assert "shelf__label" in listed
        with runtime.db.read() as conn:
            assert "shelf__count" in tools_repo.tool_texts(conn)  # its row (and grants) kept

        await shelf.offer([shelf.count, Label()])  # back: callable again, same grant
        asked = len(scripted.requests)
        scripted.outcomes.clear()
        scripted.then(calls(count), speak("three again"))
        third = await runtime.chat(agent, "once more", session_id=first.session_id)
        assert outcome(third, "shelf__count")[0]
        assert shelf.counted == ["jam", "jam"]
        assert "shelf__count" in offered(scripted, asked)
    finally:
        await sources.stop()
    assert "shelf__count" not in runtime.registry  # stopped: nothing of it is offered


async def test_a_source_tool_follows_its_approval_policy(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, plugin: ModuleType
) -> None:
    """`unsafe` holds every call of a source's tool: what it changes is not known here."""
    shelf = Shelf("shelf", [])
    plugin.SOURCES.append(shelf)
    sources = await start_tool_sources(runtime)
    try:
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("shelf__count")]))
        save_tool_settings(runtime.db, agent.id, ToolSettings(approvals={"shelf__count": "unsafe"}))
        scripted.outcomes.clear()
        scripted.then(calls(("shelf__count", {"item": "jam"})))
        result = await runtime.turns.chat(agent, "count it")
        assert result.stopped_by == "approval"
        assert shelf.counted == []  # held, not run
        [pending] = runtime.approvals.list_approvals(session_id=result.session_id)
        assert (pending.tool_name, pending.arguments) == ("shelf__count", {"item": "jam"})
    finally:
        await sources.stop()


async def test_sources_start_in_order_and_stop_in_reverse(
    runtime: Runtime, plugin: ModuleType
) -> None:
    journal: list[str] = []
    plugin.SOURCES.extend([Shelf("pantry", journal), Shelf("cellar", journal)])
    sources = await start_tool_sources(runtime)
    assert journal == ["start pantry", "start cellar"]
    assert {"pantry__count", "cellar__count"} <= set(runtime.registry.names())
    await sources.stop()
    assert journal == ["start pantry", "start cellar", "stop cellar", "stop pantry"]
    assert [s for s in runtime.registry.names() if "__" in s] == []
    assert runtime.registry.sources() == []


async def test_a_source_that_cannot_start_offers_nothing_and_the_others_run(
    runtime: Runtime, plugin: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    journal: list[str] = []
    broken = BrokenShelf("broken", journal)
    plugin.SOURCES.extend([Shelf("pantry", journal), broken, Shelf("cellar", journal)])
    caplog.set_level(logging.ERROR)
    sources = await start_tool_sources(runtime)
    try:
        assert journal == ["start pantry", "start broken", "start cellar"]
        names = set(runtime.registry.names())
        assert {"pantry__count", "cellar__count"} <= names
        assert not {n for n in names if n.startswith("broken__")}  # what it offered is gone
        assert sources.failed == {
            "broken": "ConnectionError: the shelf server refused the connection"
        }
        assert "tool source broken did not start; its tools are absent" in caplog.text
        assert any("tool source broken did not start" in n for n in runtime.notices)
    finally:
        await sources.stop()
    assert journal[3:] == ["stop cellar", "stop pantry"]  # the broken one was never started


async def test_a_clashing_namespace_is_left_out_and_a_non_source_refused(
    runtime: Runtime, plugin: ModuleType
) -> None:
    journal: list[str] = []
    plugin.SOURCES.extend([Shelf("mcp__files", journal), Shelf("mcp", journal)])
    sources = await start_tool_sources(runtime)
    try:
        assert journal == ["start mcp__files"]
        assert "mcp" in sources.failed
        assert any("tool source mcp left out" in n for n in runtime.notices)
    finally:
        await sources.stop()
    plugin.SOURCES[:] = [Label()]  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="which is not a ToolSource"):
        registered_tool_sources(runtime.settings)


@pytest.mark.parametrize("role", ["worker", "up without HTTP"])
async def test_every_background_role_starts_and_stops_the_sources(
    settings: Settings, db: Database, plugin: ModuleType, role: str
) -> None:
    """`opencrab worker` and a headless `opencrab up` (the app's lifespan: test_server's
    test_tool_sources) run the sources till SIGTERM."""
    journal: list[str] = []
    shelf = Shelf("shelf", journal)
    plugin.SOURCES.append(shelf)
    serve = run_worker if role == "worker" else serve_without_http
    serving = asyncio.create_task(serve(settings, db))
    started = asyncio.ensure_future(shelf.started.wait())
    await asyncio.wait({serving, started}, return_when=asyncio.FIRST_COMPLETED)
    assert not serving.done(), serving.exception()  # it did not fail before the start
    assert journal == ["start shelf"]
    signal.raise_signal(signal.SIGTERM)  # what stops both
    await serving
    assert journal == ["start shelf", "stop shelf"]
