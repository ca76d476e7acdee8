"""A provider that replays scripted outcomes: for router and engine tests.

It implements the real LlmProvider interface; what it returns (or raises) is queued by
the test, and every request it receives is kept in `requests`.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from opencrab.config.providers import ProviderFacts
from opencrab.errors import LlmError
from opencrab.llm.base import LlmProvider
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    Choice,
    FinishReason,
    Message,
    ModelInfo,
    ToolCall,
    ToolCallDelta,
    Usage,
)

Outcome = ChatResponse | LlmError | str


def reply(
    text: str = "",
    *,
    tool_calls: list[ToolCall] | None = None,
    usage: Usage | None = None,
    cost_usd: float | None = None,
    model: str = "scripted",
    finish: FinishReason | None = None,
) -> ChatResponse:
    """A ChatResponse with the given text and/or tool calls (`finish`: why it ended)."""
    finish = finish or ("tool_calls" if tool_calls else "stop")
    return ChatResponse(
        id="resp-1",
        model=model,
        provider="scripted",
        choices=[
            Choice(message=Message.assistant(text or None, tool_calls or []), finish_reason=finish)
        ],
        usage=usage or Usage.of(10, 5),
        cost_usd=cost_usd,
    )


class ScriptedProvider(LlmProvider):
    """Returns queued outcomes in order; the last one repeats when the queue runs dry.

    Registered under any name (never through the hook); the router takes the facts of
    the registered provider of that name, these (none of its own) otherwise."""

    facts = ProviderFacts()

    def __init__(
        self,
        name: str,
        *outcomes: Outcome,
        configured: bool = True,
        models: list[str] | None = None,
    ) -> None:
        super().__init__(name=name)
        self.models = models or ["scripted"]
        self.outcomes: deque[Outcome] = deque(outcomes)
        self.requests: list[ChatRequest] = []
        self.configured = configured
        self.fail_stream_after: int | None = None  # raise this many chunks into a stream
        self.stream_error: LlmError | None = None
        self.hold: threading.Event | None = None  # when given, calls wait until it is set
        self.calls_started = 0

    def then(self, *outcomes: Outcome) -> ScriptedProvider:
        self.outcomes.extend(outcomes)
        return self

    def _next(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        outcome = self.outcomes.popleft() if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, LlmError):
            raise outcome
        if isinstance(outcome, str):
            outcome = reply(outcome)
        return outcome.model_copy(update={"provider": self.name, "model": request.model})

    async def _wait_for_hold(self) -> None:
        self.calls_started += 1  # (the call reached the model, held or not)
        if self.hold is not None and not self.hold.is_set():
            await asyncio.to_thread(self.hold.wait)

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        await self._wait_for_hold()
        return self._next(request)

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        await self._wait_for_hold()
        response = self._next(request)
        pieces = [response.text[i : i + 4] for i in range(0, len(response.text), 4)]
        for n, piece in enumerate(pieces):
            if self.fail_stream_after is not None and n >= self.fail_stream_after:
                assert self.stream_error is not None
                raise self.stream_error
            yield ChatChunk(text=piece, id=response.id, model=response.model)
        for index, call in enumerate(response.tool_calls):
            yield ChatChunk(
                tool_calls=[
                    ToolCallDelta(
                        index=index, id=call.id, name=call.name, arguments=call.raw_arguments or ""
                    )
                ]
            )
        yield ChatChunk(
            finish_reason=response.finish_reason, usage=response.usage, cost_usd=response.cost_usd
        )

    async def available_models(self) -> list[ModelInfo]:
        return [ModelInfo(id=model, provider=self.name) for model in self.models]

    async def health_check(self) -> bool:
        return self.configured

    def is_configured(self) -> bool:
        return self.configured

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"ScriptedProvider({self.name!r})"


def kwargs_of(request: ChatRequest) -> dict[str, Any]:
    return request.model_dump(exclude_defaults=True)


class SmallWindow(ScriptedProvider):
    """A scripted provider whose models have a 9,000-token window (compaction comes soon)."""

    def context_window(self, model: str) -> int:
        return 9000
