"""A scripted provider that holds every call at a gate until the test opens it.

Calls that reached the model stay in flight while other turns decide, which is when a
budget that is only checked (not reserved) lets every turn through. The gate is an
asyncio event of the loop the calls run on; `open` may be called from any thread (a
test driving two runtimes, each on its own loop in its own thread).

    provider = GatedProvider("openai", "ok")
    ... start turns; wait until provider.calls_started + turns ended == turns started
    provider.open()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Sequence
from typing import Any

from opencrab.core.steps import TurnResult
from opencrab.llm.types import ChatRequest, ChatResponse
from tests.fakes.scripted_provider import Outcome, ScriptedProvider


class GatedProvider(ScriptedProvider):
    """Counts the calls that reached it (`calls_started`) and answers none until `open`."""

    def __init__(self, name: str, *outcomes: Outcome) -> None:
        super().__init__(name, *outcomes)
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._opened = False

    def _event(self) -> asyncio.Event:
        with self._lock:
            if self._gate is None:
                self._loop = asyncio.get_running_loop()
                self._gate = asyncio.Event()
                if self._opened:
                    self._gate.set()
            return self._gate

    def open(self) -> None:
        """Let every held call and every later one answer."""
        with self._lock:
            self._opened = True
            gate, loop = self._gate, self._loop
        if gate is not None and loop is not None:
            loop.call_soon_threadsafe(gate.set)

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        self.calls_started += 1
        await self._event().wait()
        return self._next(request)


async def settled(provider: GatedProvider, tasks: Sequence[asyncio.Future[Any]]) -> int:
    """Wait until each task's call is held at the provider's gate or the task ended (a
    turn refused); the number of calls held then. Never longer than two minutes."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 120
    while provider.calls_started + sum(t.done() for t in tasks) < len(tasks):
        if loop.time() > give_up:
            raise AssertionError(
                f"{provider.calls_started} calls held and {sum(t.done() for t in tasks)} "
                f"of {len(tasks)} turns ended after 120 s"
            )
        await asyncio.sleep(0.01)
    return provider.calls_started


async def at_once(
    provider: GatedProvider, turns: Sequence[Awaitable[TurnResult]]
) -> tuple[int, list[TurnResult]]:
    """Start every turn at once, hold their calls until all have decided, then let the
    held calls answer: (the calls that reached the model, every turn's result)."""
    tasks = [asyncio.ensure_future(turn) for turn in turns]
    held = await settled(provider, tasks)
    provider.open()
    return held, list(await asyncio.gather(*tasks))
