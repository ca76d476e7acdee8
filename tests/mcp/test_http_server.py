"""An MCP server over streamable HTTP (the demo server under uvicorn on 127.0.0.1, a
real subprocess): its tools called with the table's bearer token; without
`allow_private` the SSRF guard refuses the loopback address, naming it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from mcp.shared.exceptions import MCPError

from opencrab.config.mcp import McpSection, McpServerConfig
from opencrab.core.agent import Agent, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.core.tools import tool_id
from opencrab.mcp.client import McpServerSource
from tests.core.conftest import calls, speak
from tests.fakes.mcp_demo import demo_over_http, serve_demo
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import offered_when, script
from tests.mcp.conftest import outcome


@pytest.fixture
def http_port() -> int:
    return free_port()


@pytest.fixture
def http_demo(http_port: int) -> Iterator[str]:
    """The demo server's streamable HTTP endpoint, served by its own process."""
    with demo_over_http(http_port) as url:
        yield url


async def test_an_http_server_is_called_with_the_bearer_token(
    runtime: Runtime,
    agent: Agent,
    scripted: ScriptedProvider,
    http_demo: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEMO_TOKEN", "t0ken")
    runtime.settings.mcp = McpSection(
        servers={
            "web": McpServerConfig(
                url=http_demo,
                headers={"X-Team": "crabs"},
                bearer_token_env="DEMO_TOKEN",
                allow_private=True,
            )
        }
    )
    sources = await start_tool_sources(runtime)
    try:
        assert sources.failed == {}
        names = ("mcp__web__add", "mcp__web__authorization")
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id(n) for n in names]))
        script(
            scripted,
            calls(("mcp__web__add", {"a": 20, "b": 22}), ("mcp__web__authorization", {})),
            speak("done"),
        )
        result = await runtime.chat(agent, "add and tell")
        assert json.loads(outcome(result, "mcp__web__add")[1])["text"] == "42"
        assert json.loads(outcome(result, "mcp__web__authorization")[1])["text"] == ("Bearer t0ken")
    finally:
        await sources.stop()


async def test_the_ssrf_guard_refuses_a_private_http_server_unless_allowed(
    runtime: Runtime, http_demo: str
) -> None:
    runtime.settings.mcp = McpSection(servers={"web": McpServerConfig(url=http_demo)})
    sources = await start_tool_sources(runtime)
    try:
        reason = sources.failed["mcp__web"]
        assert "MCP server 'web'" in reason
        assert "refused to connect to 127.0.0.1: a loopback address" in reason
        assert "or set allow_private = true in [mcp.servers.web]" in reason
        assert not [n for n in runtime.registry.names() if n.startswith("mcp__web__")]
    finally:
        await sources.stop()


async def test_a_missing_token_variable_is_named(runtime: Runtime, http_demo: str) -> None:
    table = McpServerConfig(url=http_demo, bearer_token_env="ABSENT_TOKEN", allow_private=True)
    runtime.settings.mcp = McpSection(servers={"web": table})
    sources = await start_tool_sources(runtime)
    try:
        assert "bearer_token_env names ABSENT_TOKEN, which is not set" in sources.failed["mcp__web"]
    finally:
        await sources.stop()


async def test_a_call_to_a_gone_http_server_fails_and_it_is_connected_again(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, http_port: int
) -> None:
    url = f"http://127.0.0.1:{http_port}/mcp"
    runtime.settings.mcp = McpSection(servers={"web": McpServerConfig(url=url, allow_private=True)})
    first = serve_demo(http_port)
    sources = await start_tool_sources(runtime)
    second = None
    try:
        (web,) = sources.started
        assert isinstance(web, McpServerSource)
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("mcp__web__add")]))
        first.terminate()
        first.wait(timeout=30)
        script(scripted, calls(("mcp__web__add", {"a": 1, "b": 1})), speak("gone"))
        gone = await runtime.chat(agent, "add")
        success, said = outcome(gone, "mcp__web__add")
        assert not success
        assert "MCP server 'web'" in said

        second = serve_demo(http_port)  # back, on the same address
        await offered_when(web, lambda: web.state == "running" and web.restarts >= 1)
        script(scripted, calls(("mcp__web__add", {"a": 2, "b": 2})), speak("back"))
        back = await runtime.chat(agent, "add again")
        assert json.loads(outcome(back, "mcp__web__add")[1])["text"] == "4"

        second.terminate()
        second.wait(timeout=30)
        assert web.session is not None
        with pytest.raises(MCPError, match="Connection closed"):  # the SDK's own view
            await web.session.call_tool("add", {"a": 3, "b": 3})
    finally:
        async with asyncio.timeout(60):  # a guard against a hang, not a measure
            await sources.stop()  # a cancel the SDK's cleanup swallows still stops it
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    assert web.state == "stopped"


async def test_an_http_server_not_up_at_start_is_tried_again_until_it_is(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, http_port: int
) -> None:
    url = f"http://127.0.0.1:{http_port}/mcp"
    runtime.settings.mcp = McpSection(
        servers={"late": McpServerConfig(url=url, allow_private=True)}
    )
    sources = await start_tool_sources(runtime)
    process = None
    try:
        reason = sources.failed["mcp__late"]
        assert "MCP server 'late'" in reason
        assert "trying again in 1 s" in reason
        assert any("tool source mcp__late did not start yet" in n for n in runtime.notices)
        (late,) = sources.started  # counted as started: stopping it ends the tries
        assert isinstance(late, McpServerSource)
        assert late.state in ("failed", "starting")
        assert "mcp__late__add" not in runtime.registry

        process = serve_demo(http_port)  # up now, after OpenCrab started
        await offered_when(late, lambda: late.state == "running")
        assert late.restarts >= 1
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("mcp__late__add")]))
        script(scripted, calls(("mcp__late__add", {"a": 20, "b": 22})), speak("42"))
        result = await runtime.chat(agent, "add")
        assert json.loads(outcome(result, "mcp__late__add")[1])["text"] == "42"
    finally:
        async with asyncio.timeout(60):  # a guard against a hang, not a measure
            await sources.stop()
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
    assert late.state == "stopped"
