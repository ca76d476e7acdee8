"""An MCP server over streamable HTTP (the demo server under uvicorn on 127.0.0.1, a
real subprocess): its tools called with the table's bearer token; without
`allow_private` the SSRF guard refuses the loopback address, naming it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from opencrab.config.mcp import McpSection, McpServerConfig
from opencrab.core.agent import Agent, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.core.tools import tool_id
from tests.core.conftest import calls, speak
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider
from tests.mcp.conftest import DEMO, outcome, script


@pytest.fixture
def http_demo() -> Iterator[str]:
    """The demo server's streamable HTTP endpoint, served by its own process."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(DEMO), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # until it listens (or died)
            assert process.poll() is None, "the demo server exited"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


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
