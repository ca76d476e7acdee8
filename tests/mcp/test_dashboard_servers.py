"""MCP servers added over `/api/mcp/...` (what the dashboard's MCP page sends), in an
in-process app whose lifespan runs the tool sources: the demo server (a real MCP server
of the official SDK) over stdio from the config and over HTTP from the API.

A server added starts without a restart and its tools can be granted and called; its
bearer token is stored encrypted and never comes back; a config table's name wins; bad
bodies are 400s naming the field; removing a server stops it; another process on the
same database follows the change."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from opencrab.config import Settings
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.llm.router import LlmRouter
from opencrab.mcp.client.stored import StoredMcpServers
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.mcp_demo import demo_over_http, demo_stdio
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import offered_when
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

TOKEN = "s3cret-bearer-9f2a"


@pytest.fixture
def client(settings: Settings, db: Database, scripted: ScriptedProvider) -> Iterator[LocalClient]:
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as c:
        yield c


@pytest.fixture
def http_demo() -> Iterator[str]:
    """The demo server's streamable HTTP endpoint, served by its own process."""
    with demo_over_http() as url:
        yield url


def web_body(url: str, **extra: object) -> dict[str, object]:
    return {
        "name": "web",
        "url": url,
        "allowPrivate": True,
        "bearerToken": TOKEN,
        "headers": {"X-Team": "crabs"},
        **extra,
    }


def test_a_server_added_starts_and_its_tools_are_granted_and_called(
    client: LocalClient,
    http_demo: str,
    settings: Settings,
) -> None:
    agent = new_agent(client)
    made = client.post("/api/mcp/servers", json=web_body(http_demo))
    assert made.status_code == 201, made.text
    view = made.json()
    assert (view["origin"], view["state"], view["transport"]) == ("dashboard", "running", "http")
    assert TOKEN not in made.text
    assert view["secrets"]["bearerToken"] == TOKEN[-4:]
    tools = {t["name"]: t for t in view["tools"]}
    assert tools["add"]["annotations"]["readOnlyHint"] is True
    assert tools["add"]["readOnly"] is True
    assert tools["wipe"]["annotations"]["destructiveHint"] is True
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert "mcp__web__add" in {t["name"] for t in client.get("/api/tools").json()}

    listed = client.get("/api/mcp/servers").json()
    assert [s["name"] for s in listed] == ["demo", "web"]
    assert TOKEN not in json.dumps(listed)
    demo = listed[0]
    assert (demo["origin"], demo["state"]) == ("config", "running")

    granted = client.put(f"/api/mcp/servers/web/agents/{agent['id']}", json={"enabled": True})
    assert granted.status_code == 200, granted.text
    (grant,) = granted.json()["agents"]
    assert grant["enabled"]
    assert grant["granted"] == grant["tools"] == len(tools)
    by_name = {t["name"]: t for t in client.get(f"/api/agents/{agent['id']}/tools").json()}
    assert by_name["mcp__web__add"]["granted"]
    assert by_name["mcp__web__wipe"]["granted"]
    assert not by_name["mcp__demo__add"]["granted"]

    add = {"arguments": {"a": 2, "b": 3}}
    called = client.post("/api/mcp/servers/web/tools/add/call", json=add)
    assert called.status_code == 200, called.text
    assert called.json()["success"]
    assert called.json()["text"] == "5"
    assert called.json()["structured"] == {"result": 5}
    echoed = client.post("/api/mcp/servers/web/tools/authorization/call", json={})
    assert echoed.json()["text"] == "Bearer <redacted>"  # it reached the server, not the page
    wrong = client.post("/api/mcp/servers/web/tools/add/call", json={"arguments": {"a": "x"}})
    assert "arguments" in error_of(wrong, 400, "validation_error")
    missing = client.post("/api/mcp/servers/web/tools/nothing/call", json={"arguments": {}})
    assert "nothing" in error_of(missing, 404, "not_found")

    revoked = client.put(f"/api/mcp/servers/web/agents/{agent['id']}", json={"enabled": False})
    assert revoked.json()["agents"][0]["granted"] == 0

    with sqlite3.connect(settings.database_url.removeprefix("sqlite:///")) as conn:
        row = conn.execute("SELECT * FROM mcp_servers").fetchone()
    assert TOKEN not in repr(row)
    assert "crabs" in repr(row)

    removed = client.delete("/api/mcp/servers/web")
    assert removed.status_code == 204
    assert "mcp__web__add" not in {t["name"] for t in client.get("/api/tools").json()}
    assert [s["name"] for s in client.get("/api/mcp/servers").json()] == ["demo"]
    error_of(client.delete("/api/mcp/servers/web"), 404, "not_found")


def test_an_edit_keeps_the_stored_token_and_restarts_the_server(
    client: LocalClient,
    http_demo: str,
) -> None:
    assert client.post("/api/mcp/servers", json=web_body(http_demo)).status_code == 201
    body = web_body(http_demo, headers={"X-Team": "lobsters"})
    del body["name"], body["bearerToken"]
    edited = client.put("/api/mcp/servers/web", json=body)
    assert edited.status_code == 200, edited.text
    assert edited.json()["headers"] == {"X-Team": "lobsters"}
    assert edited.json()["state"] == "running"
    echoed = client.post("/api/mcp/servers/web/tools/authorization/call", json={})
    assert echoed.json()["text"] == "Bearer <redacted>"  # the stored token, kept
    cleared = client.put("/api/mcp/servers/web", json={**body, "bearerToken": ""})
    assert cleared.json()["secrets"]["bearerToken"] is None
    echoed = client.post("/api/mcp/servers/web/tools/authorization/call", json={})
    assert echoed.json()["text"] is None or echoed.json()["text"] == ""


def test_a_server_edited_into_the_other_transport_drops_the_old_kinds_secrets(
    client: LocalClient, http_demo: str
) -> None:
    assert client.post("/api/mcp/servers", json=web_body(http_demo)).status_code == 201
    stdio = demo_stdio()
    body = {"command": stdio.command, "args": stdio.args, "readPaths": stdio.read_paths}
    body["secretEnv"] = {"DEMO_KEY": "env-secret-5678"}
    edited = client.put("/api/mcp/servers/web", json=body)
    assert edited.status_code == 200, edited.text
    view = edited.json()
    assert (view["transport"], view["state"]) == ("stdio", "running")
    assert view["secrets"] == {"bearerToken": None, "headers": {}, "env": {"DEMO_KEY": "5678"}}
    env = client.post("/api/mcp/servers/web/tools/environment/call", json={})
    assert env.json()["structured"]["DEMO_KEY"] == "<redacted>"  # it has it; not shown
    assert "env-secret-5678" not in env.text
    back = client.put("/api/mcp/servers/web", json={"url": http_demo, "allowPrivate": True})
    assert back.json()["secrets"] == {"bearerToken": None, "headers": {}, "env": {}}


def test_secrets_the_key_cannot_decrypt_are_named_and_asked_for_again(
    client: LocalClient, http_demo: str, settings: Settings
) -> None:
    assert client.post("/api/mcp/servers", json=web_body(http_demo)).status_code == 201
    foreign = Fernet(Fernet.generate_key()).encrypt(b'{"bearer_token": "x"}').decode()
    with sqlite3.connect(settings.database_url.removeprefix("sqlite:///")) as conn:
        conn.execute(
            "UPDATE mcp_servers SET secrets_encrypted = ?, revision = revision + 1", (foreign,)
        )
    # the app's watcher (every 3 s) sees the new revision and starts it from the row
    deadline = time.monotonic() + 120  # a guard against a hang, not a measure
    while (view := client.get("/api/mcp/servers/web").json())["state"] != "failed":
        assert time.monotonic() < deadline, view
        time.sleep(0.2)
    assert "does not decrypt" in view["problem"]
    kept = client.put("/api/mcp/servers/web", json={"url": http_demo, "allowPrivate": True})
    assert "enter the token again" in error_of(kept, 409, "conflict")
    again = client.put(
        "/api/mcp/servers/web",
        json={"url": http_demo, "allowPrivate": True, "bearerToken": TOKEN},
    )
    assert again.json()["state"] == "running"
    assert again.json()["problem"] is None


def test_a_failing_server_shows_its_error_and_the_others_run(client: LocalClient) -> None:
    made = client.post(
        "/api/mcp/servers", json={"name": "broken", "command": "/nonexistent/mcp-server"}
    )
    assert made.status_code == 201, made.text
    view = made.json()
    # a command missing now may appear later (an install still running): tried again
    assert view["state"] in ("starting", "restarting")
    while (view := client.get("/api/mcp/servers/broken").json())["lastError"] is None:
        time.sleep(0.2)
    assert view["state"] == "restarting"
    assert "/nonexistent/mcp-server" in view["lastError"]
    assert view["tools"] == []
    demo = client.get("/api/mcp/servers/demo").json()
    assert demo["state"] == "running"
    called = client.post("/api/mcp/servers/broken/tools/add/call", json={})
    assert "broken" in error_of(called, 404, "not_found")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"name": "x", "command": "a", "url": "http://h/mcp"}, "url"),
        ({"name": "x"}, "url"),
        ({"name": "a__b", "command": "a"}, "name"),
        ({"name": "x", "url": "ftp://h"}, "url"),
        ({"name": "x", "url": "http://h/mcp", "headers": {"Authorization": "Bearer t"}}, "headers"),
        ({"name": "x", "url": "http://h/mcp", "headers": {"X-A": "a\r\nInjected: 1"}}, "headers"),
        ({"name": "x", "command": "a", "env": {"1BAD": "v"}}, "env"),
        ({"name": "x", "url": "http://h/mcp", "headers": {"X-Team": "カニ"}}, "headers: X-Team"),
        ({"name": "x", "command": "a", "bearerToken": "t"}, "bearerToken"),
        ({"name": "x", "url": "http://h/mcp", "secretEnv": {"A": "v"}}, "secretEnv"),
        ({"name": "x", "command": "a", "callTimeoutSecs": 0}, "callTimeoutSecs"),
        ({"name": "x", "command": "a", "colour": "red"}, "colour"),
        ({"name": "x", "command": "a", "secretEnv": {"TOKEN": ""}}, "secretEnv: TOKEN"),
    ],
)
def test_bad_bodies_are_400s_naming_the_field(
    client: LocalClient, body: dict[str, object], named: str
) -> None:
    message = error_of(client.post("/api/mcp/servers", json=body), 400, "validation_error")
    assert named in message
    assert client.get("/api/mcp/servers").json()[-1]["name"] == "demo"  # nothing stored


def test_the_configs_server_wins_and_is_read_only(client: LocalClient) -> None:
    taken = client.post("/api/mcp/servers", json={"name": "demo", "command": "x"})
    assert "config file" in error_of(taken, 409, "conflict")
    kept = client.delete("/api/mcp/servers/demo")
    assert "config file" in error_of(kept, 409, "conflict")
    edit = client.put("/api/mcp/servers/demo", json={"command": "x"})
    error_of(edit, 409, "conflict")


@pytest.fixture
def servers() -> dict[str, object]:
    """The config's demo server, its env a secret that must not be shown."""
    return {"demo": demo_stdio(call_timeout_secs=10, env={"DEMO_KEY": "config-secret-1234"})}


def test_a_config_servers_env_values_are_hidden(client: LocalClient) -> None:
    demo = client.get("/api/mcp/servers/demo")
    assert demo.json()["env"] == {"DEMO_KEY": "••••"}
    assert "config-secret-1234" not in demo.text


async def test_another_process_follows_a_server_added_and_removed(
    runtime: Runtime,
    http_demo: str,
    tmp_path: Path,
) -> None:
    """Two processes' worth of sources over one database: what one saves, the other
    starts within its poll and stops once it is removed."""
    from opencrab.mcp.client.stored import remove_server, save_server

    sources = await start_tool_sources(runtime)
    other = StoredMcpServers(runtime, sources)
    other.poll_secs = 0.2
    await other.sync()
    other.start_watching()
    try:
        body = {"url": http_demo, "allow_private": True, "bearer_token": TOKEN}
        await asyncio.to_thread(save_server, runtime, "web", body, actor="local", create=True)
        async with asyncio.timeout(120):  # a guard against a hang, not a measure
            while "mcp__web__add" not in runtime.registry:
                await asyncio.sleep(0.1)
        source = other.source("web")
        assert source is not None
        await offered_when(source, lambda: source.state == "running")
        await asyncio.to_thread(remove_server, runtime, "web", actor="local")
        async with asyncio.timeout(120):  # stopped, then detached from the registry
            while any(s.namespace == "mcp__web" for s in runtime.registry.sources()):
                await asyncio.sleep(0.1)
        assert "mcp__web__add" not in runtime.registry
        assert other.source("web") is None
    finally:
        await other.stop()
        await sources.stop()
