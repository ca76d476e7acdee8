"""MCP client fixtures: settings naming the demo server (tests/fakes/mcp_demo.py, a real
MCP server run as a subprocess), a runtime whose router answers with a ScriptedProvider,
and the running tool sources (tests/fakes/scripted_runtime.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from opencrab.config import Settings, load_settings
from opencrab.config.mcp import McpSection, McpServerConfig
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult
from opencrab.core.tool_sources import RunningToolSources
from opencrab.mcp.client import McpServerSource
from opencrab.store import Database
from tests.fakes.mcp_demo import demo_stdio
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import running_sources, scripted_runtime


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
    async with scripted_runtime(settings, db, scripted) as rt:
        yield rt


@pytest.fixture
async def sources(runtime: Runtime) -> AsyncIterator[RunningToolSources]:
    async with running_sources(runtime) as running:
        yield running


@pytest.fixture
def demo(sources: RunningToolSources) -> McpServerSource:
    (found,) = [s for s in sources.attached if s.namespace == "mcp__demo"]
    assert isinstance(found, McpServerSource)
    return found


@pytest.fixture
def agent(runtime: Runtime) -> Agent:
    return runtime.agents.create(AgentCreate(name="aki", prompt="You use tools."))


def outcome(result: TurnResult, name: str) -> tuple[bool, str]:
    """Whether the turn's one call of `name` succeeded, and what the model read."""
    (found,) = [a for a in result.actions if a.name == name]
    return found.result.success, found.result.output()
