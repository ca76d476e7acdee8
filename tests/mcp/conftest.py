"""MCP client fixtures: settings naming the demo server (tests/fakes/mcp_demo_server.py,
a real MCP server run as a subprocess), a runtime whose router answers with a
ScriptedProvider, and the running tool sources."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from opencrab.actions.base import ToolSource
from opencrab.config import Settings, load_settings
from opencrab.config.mcp import McpSection, McpServerConfig
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult
from opencrab.core.tool_sources import RunningToolSources, start_tool_sources
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.mcp.client import McpServerSource
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider

DEMO = Path(__file__).parents[1] / "fakes" / "mcp_demo_server.py"


def demo_stdio(**table: Any) -> McpServerConfig:
    """The demo server over stdio; what the box must let it read: this Python, its
    virtualenv and the script's folder."""
    paths = sorted({sys.prefix, sys.base_prefix, str(DEMO.parent)})
    return McpServerConfig(command=sys.executable, args=[str(DEMO)], read_paths=paths, **table)


@pytest.fixture
def servers() -> dict[str, McpServerConfig]:
    """The `[mcp.servers]` tables of the test (the demo server as `demo` by default)."""
    return {"demo": demo_stdio(call_timeout_secs=10)}


@pytest.fixture
def settings(data_dir: Path, servers: dict[str, McpServerConfig]) -> Settings:
    loaded = load_settings()
    loaded.mcp = McpSection(servers=servers)
    return loaded


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai", "unscripted reply")


@pytest.fixture
async def runtime(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    recorder = MetricsRecorder(db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(scripted)
    async with Runtime.open(settings, db=db, router=router) as rt:
        yield rt
    await recorder.aclose()


@pytest.fixture
async def sources(runtime: Runtime) -> AsyncIterator[RunningToolSources]:
    running = await start_tool_sources(runtime)
    yield running
    await running.stop()


@pytest.fixture
def demo(sources: RunningToolSources) -> McpServerSource:
    (found,) = [s for s in sources.attached if s.namespace == "mcp__demo"]
    assert isinstance(found, McpServerSource)
    return found


@pytest.fixture
def agent(runtime: Runtime) -> Agent:
    return runtime.agents.create(AgentCreate(name="aki", prompt="You use tools."))


def script(scripted: ScriptedProvider, *outcomes: Any) -> None:
    """What the model answers next (the previous script dropped)."""
    scripted.outcomes.clear()
    scripted.then(*outcomes)


def outcome(result: TurnResult, name: str) -> tuple[bool, str]:
    """Whether the turn's one call of `name` succeeded, and what the model read."""
    (found,) = [a for a in result.actions if a.name == name]
    return found.result.success, found.result.output()


async def offered_when(source: ToolSource, check: Callable[[], bool]) -> None:
    """Return once `check()` holds after one of the source's offers (now or later)."""
    changed = asyncio.Event()

    async def listener(_: ToolSource) -> None:
        if check():
            changed.set()

    source.subscribe(listener)
    try:
        if not check():
            async with asyncio.timeout(60):  # a guard against a hang, not a measure
                await changed.wait()
    finally:
        source.unsubscribe(listener)
