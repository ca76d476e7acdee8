"""A runtime whose model is a ScriptedProvider, for tests that run real turns through
tool sources (MCP servers, remote A2A agents, the engine's own actions): built over a
test's database, its tool sources started, the model's next answers scripted, and a
source watched until it offers what a test waits for.

    async with scripted_runtime(settings, db, scripted) as runtime:
        async with running_sources(runtime) as sources:
            script(scripted, calls(("mcp__demo__add", {"a": 1, "b": 2})), speak("done"))
            await runtime.chat(agent, "add")
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from opencrab.actions.base import ToolSource
from opencrab.config import Settings
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import RunningToolSources, start_tool_sources
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider


@asynccontextmanager
async def scripted_runtime(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    """The runtime over `db` whose router answers with `scripted`, its calls recorded
    (MetricsRecorder, closed after the runtime)."""
    recorder = MetricsRecorder(db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(scripted)
    try:
        async with Runtime.open(settings, db=db, router=router) as rt:
            yield rt
    finally:
        await recorder.aclose()


@asynccontextmanager
async def running_sources(runtime: Runtime) -> AsyncIterator[RunningToolSources]:
    """The runtime's tool sources, started; stopped on the way out."""
    running = await start_tool_sources(runtime)
    try:
        yield running
    finally:
        await running.stop()


def script(scripted: ScriptedProvider, *outcomes: Any) -> None:
    """What the model answers next (the previous script dropped)."""
    scripted.outcomes.clear()
    scripted.then(*outcomes)


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
