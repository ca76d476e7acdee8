"""A provider reply over `[llm] max_reply_bytes` is refused as ReplyTooLarge while it is
read: whole bodies, streams, compressed bodies, through the SDKs and plain httpx."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import ProviderConfig
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.errors import ReplyTooLarge
from opencrab.event_log import EventLog
from opencrab.llm.base import LlmProvider
from opencrab.llm.providers.anthropic import AnthropicProvider
from opencrab.llm.providers.ollama import OllamaProvider
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatRequest, Message
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply

CAP = 64 * 1024
BIG = "a" * 300_000  # well over the cap


def ask(model: str = "m") -> ChatRequest:
    return ChatRequest(model=model, messages=[Message.user("Hi")])


def openai_completion(content: str) -> dict[str, Any]:
    """A chat.completion body as OpenAI sends it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": "gpt-5-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def openai_chunk(content: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "model": "gpt-5-mini",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }


@pytest.fixture
async def openai(fake_llm_server: FakeLlmServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(
        ProviderConfig(api_key=SecretStr("sk-test"), base_url=fake_llm_server.url + "/v1"),
        name="openai",
    )
    p.max_reply_bytes = CAP
    yield p
    await p.aclose()


async def read_all(provider: LlmProvider, stream: bool) -> None:
    if stream:
        async for _ in provider.chat_completion_stream(ask()):
            pass
    else:
        await provider.chat_completion(ask())


async def refused(provider: LlmProvider, *, stream: bool = False) -> ReplyTooLarge:
    with pytest.raises(ReplyTooLarge) as caught:
        await read_all(provider, stream)
    error = caught.value
    assert error.provider == provider.name
    assert f"over the limit of {CAP} bytes" in str(error)
    assert "[llm] max_reply_bytes" in str(error)
    return error


async def test_openai_reply_over_the_cap_is_a_provider_error(
    openai: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply("/v1/chat/completions", Reply(json=openai_completion(BIG)))
    await refused(openai)


async def test_a_reply_under_the_cap_is_read_as_before(
    openai: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply("/v1/chat/completions", Reply(json=openai_completion("b" * 60_000)))
    assert (await openai.chat_completion(ask())).text == "b" * 60_000


async def test_openai_stream_over_the_cap_stops_while_streaming(
    openai: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    events: list[Any] = [openai_chunk("c" * 1000) for _ in range(300)]
    fake_llm_server.reply(
        "/v1/chat/completions", Reply(sse=[*events, openai_chunk("", "stop"), "[DONE]"])
    )
    await refused(openai, stream=True)


async def test_a_compressed_body_is_counted_as_it_expands(
    openai: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    packed = gzip.compress(json.dumps(openai_completion(" " * 5_000_000)).encode())
    assert len(packed) < CAP
    fake_llm_server.reply(
        "/v1/chat/completions", Reply(body=packed, headers={"content-encoding": "gzip"})
    )
    await refused(openai)


async def test_anthropic_reply_over_the_cap_is_a_provider_error(
    fake_llm_server: FakeLlmServer,
) -> None:
    provider = AnthropicProvider(
        ProviderConfig(api_key=SecretStr("sk-ant-test"), base_url=fake_llm_server.url),
        name="anthropic",
    )
    provider.max_reply_bytes = CAP
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": BIG}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    fake_llm_server.reply("/v1/messages", Reply(json=body))
    try:
        await refused(provider)
    finally:
        await provider.aclose()


async def test_ollama_stream_over_the_cap_is_a_provider_error(
    fake_llm_server: FakeLlmServer,
) -> None:
    provider = OllamaProvider(ProviderConfig(base_url=fake_llm_server.url), name="ollama")
    provider.max_reply_bytes = CAP

    def line(content: str, done: bool = False) -> dict[str, Any]:
        return {
            "model": "m",
            "created_at": "2025-10-01T12:00:00Z",
            "message": {"role": "assistant", "content": content},
            "done": done,
        }

    fake_llm_server.reply(
        "/api/chat", Reply(ndjson=[*(line("d" * 1000) for _ in range(300)), line("", True)])
    )
    try:
        await refused(provider, stream=True)
    finally:
        await provider.aclose()


async def test_the_router_gives_providers_the_configured_cap(settings: Settings) -> None:
    settings.llm.max_reply_bytes = 5000
    router = LlmRouter(settings)
    provider = OpenAIProvider(ProviderConfig(api_key=SecretStr("k")), name="openai")
    router.register_provider(provider)
    assert provider.max_reply_bytes == 5000


async def test_a_turn_on_a_huge_reply_fails_and_stores_nothing_huge(
    settings: Settings, db: Database, fake_llm_server: FakeLlmServer
) -> None:
    settings.llm.max_reply_bytes = CAP
    settings.llm.fallback.chain = []
    router = LlmRouter(settings)
    provider = OpenAIProvider(
        ProviderConfig(api_key=SecretStr("sk-test"), base_url=fake_llm_server.url + "/v1"),
        name="openai",
    )
    router.register_provider(provider)
    fake_llm_server.reply("/v1/chat/completions", Reply(json=openai_completion("e" * 2_000_000)))
    async with Runtime.open(settings, db=db, router=router) as runtime:
        agent = runtime.agents.create(AgentCreate(name="aki", prompt="Hi."))
        result = await runtime.chat(agent, "talk")
    assert result.error is not None
    assert result.error.error == "reply_too_large"
    assert result.reply is None
    stored = EventLog(db).trace(result.trace_id)
    assert [e.type for e in stored] == ["user", "message"]
    assert len(stored[-1].model_dump_json()) < 2000  # the error, not the reply
