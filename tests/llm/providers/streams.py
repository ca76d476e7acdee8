"""Stream helpers shared by the provider tests."""

from __future__ import annotations

from opencrab.llm.base import LlmProvider
from opencrab.llm.types import ChatChunk, ChatRequest


async def collect(provider: LlmProvider, request: ChatRequest) -> list[ChatChunk]:
    """Every chunk of a streamed reply."""
    return [c async for c in provider.chat_completion_stream(request)]


async def collect_texts(provider: LlmProvider, request: ChatRequest, seen: list[str]) -> None:
    """Append each chunk's text to `seen` (kept when the stream then fails)."""
    async for c in provider.chat_completion_stream(request):
        seen.append(c.text)
