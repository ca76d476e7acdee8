"""Assemble a streamed reply: join text and tool-call argument fragments by index."""

from __future__ import annotations

from dataclasses import dataclass, field

from opencrab.llm.base import parse_arguments
from opencrab.llm.types import (
    ChatChunk,
    ChatResponse,
    Choice,
    FinishReason,
    Message,
    ToolCall,
    Usage,
)


@dataclass
class _PendingCall:
    id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)


class StreamAccumulator:
    """Collects ChatChunks into the ChatResponse the same call would have returned.

    Example:
        acc = StreamAccumulator(provider="openai", model="gpt-5-mini")
        async for chunk in provider.chat_completion_stream(request):
            acc.add(chunk)
        reply = acc.response()
    """

    def __init__(self, *, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.id = ""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self.finish_reason: FinishReason | None = None
        self.usage: Usage | None = None
        self.cost_usd: float | None = None
        self.chunks = 0

    def add(self, chunk: ChatChunk) -> None:
        self.chunks += 1
        if chunk.id and not self.id:
            self.id = chunk.id
        if chunk.model:
            self.model = chunk.model
        if chunk.text:
            self._text.append(chunk.text)
        if chunk.reasoning:
            self._reasoning.append(chunk.reasoning)
        for delta in chunk.tool_calls:
            call = self._calls.setdefault(delta.index, _PendingCall())
            if delta.id:
                call.id = delta.id
            if delta.name:
                call.name = delta.name
            if delta.arguments:
                call.fragments.append(delta.arguments)
        if chunk.finish_reason:
            self.finish_reason = chunk.finish_reason
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.cost_usd is not None:
            self.cost_usd = chunk.cost_usd

    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    def tool_calls(self) -> list[ToolCall]:
        calls = []
        for index in sorted(self._calls):
            pending = self._calls[index]
            arguments, raw = parse_arguments("".join(pending.fragments))
            calls.append(
                ToolCall(
                    id=pending.id or f"call_{index}",
                    name=pending.name or "",
                    arguments=arguments,
                    raw_arguments=raw,
                )
            )
        return calls

    def response(self) -> ChatResponse:
        calls = self.tool_calls()
        finish = self.finish_reason or ("tool_calls" if calls else "stop")
        message = Message(role="assistant", content=self.text or None, tool_calls=calls)
        return ChatResponse(
            id=self.id,
            model=self.model,
            provider=self.provider,
            choices=[Choice(index=0, message=message, finish_reason=finish)],
            usage=self.usage or Usage(),
            cost_usd=self.cost_usd,
        )
