"""Action fixtures: a runtime (real SQLite, the default registry), an agent, its context."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from opencrab.actions.base import ActionContext, ActionResult
from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai", "unscripted reply")


@pytest.fixture
async def runtime(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    router = LlmRouter(settings)
    router.register_provider(scripted)
    async with Runtime.open(settings, db=db, router=router) as rt:
        yield rt


@pytest.fixture
def agent(runtime: Runtime) -> Agent:
    return runtime.agents.create(AgentCreate(name="aki", prompt="You keep notes."))


@pytest.fixture
def ctx(runtime: Runtime, agent: Agent) -> ActionContext:
    return runtime.action_context(agent)


Call = Callable[..., Any]


@pytest.fixture
def call(ctx: ActionContext) -> Call:
    """`await call("read_file", path="x")`: the registry's dispatch, schema check included."""

    async def run(name: str, **arguments: Any) -> ActionResult:
        return await ctx.registry.dispatch(name, arguments, ctx)

    return run


@pytest.fixture
def enable(ctx: ActionContext) -> Callable[..., None]:
    """Switch gated tools on for the agent: `enable(execute_command=True)`."""

    def switch(**switches: bool) -> None:
        save_tool_settings(ctx.db, ctx.agent_id, ToolSettings(**switches))

    return switch
