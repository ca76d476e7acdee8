"""A slow scripted provider: each call lingers until another call is in flight with it.

`OverlappingProvider` makes concurrent turns meet inside the model call: a call waits
until `overlap` calls are in flight at once (then they all answer together) or until
`grace` seconds pass (then it answers alone). Turns that are not serialised therefore
reliably overlap, and turns that are serialised simply run `grace` seconds slower.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from opencrab.llm.types import ChatChunk, ChatRequest, ChatResponse
from tests.fakes.scripted_provider import Outcome, ScriptedProvider


class OverlappingProvider(ScriptedProvider):
    """A ScriptedProvider whose calls wait for company (see the module docstring)."""

    def __init__(self, name: str, *outcomes: Outcome, overlap: int = 2, grace: float = 1.0):
        super().__init__(name, *outcomes)
        self.overlap = overlap
        self.grace = grace
        self.in_flight = 0
        self.most_in_flight = 0  # the most calls that were ever in flight at once
        self._changed: asyncio.Condition | None = None

    async def _linger(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        async with changed:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            changed.notify_all()
            with contextlib.suppress(TimeoutError):  # nobody came: answer alone
                await asyncio.wait_for(
                    changed.wait_for(lambda: self.most_in_flight >= self.overlap), self.grace
                )

    async def _leave(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self.in_flight -= 1

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        await self._linger()
        try:
            return await super().chat_completion(request)
        finally:
            await self._leave()

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        await self._linger()
        try:
            async for chunk in super().chat_completion_stream(request):
                yield chunk
        finally:
            await self._leave()
