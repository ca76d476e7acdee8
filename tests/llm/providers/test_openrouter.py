"""OpenRouterProvider through the real `openai` SDK against a fake OpenRouter server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from opencrab.config.models import ProviderConfig
from opencrab.errors import (
    LlmError,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderServerError,
    RateLimited,
    StreamInterrupted,
)
from opencrab.llm.providers.openrouter import OpenRouterProvider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatRequest, Message, ToolCall, ToolDefinition
from tests.fakes.llm_server import FakeLlmServer, Reply

CHAT = "/api/v1/chat/completions"
MODEL = "anthropic/claude-sonnet-4.5"
USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 80,
    "total_tokens": 1280,
    "cost": 0.00492,
    "is_byok": False,
    "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 150},
    "completion_tokens_details": {"reasoning_tokens": 20},
}


def completion(message: dict[str, Any], *, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "gen-1760000000-abc",
        "provider": "Anthropic",
        "model": MODEL,
        "object": "chat.completion",
        "created": 1_760_000_000,
        "choices": [
            {
                "index": 0,
                "logprobs": None,
                "finish_reason": finish,
                "native_finish_reason": "end_turn",
                "message": {"role": "assistant", "refusal": None, "reasoning": None, **message},
            }
        ],
        "usage": USAGE,
    }


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choices = []
    if delta is not None or finish is not None:
        choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    body: dict[str, Any] = {
        "id": "gen-str",
        "provider": "Anthropic",
        "model": MODEL,
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def ask(**fields: Any) -> ChatRequest:
    return ChatRequest(model=MODEL, messages=[Message.user("Hi")], **fields)


async def collect_texts(
    provider: OpenRouterProvider, request: ChatRequest, seen: list[str]
) -> None:
    """Append each chunk's text to `seen` (kept when the stream then fails)."""
    async for c in provider.chat_completion_stream(request):
        seen.append(c.text)


@pytest.fixture
async def provider(fake_llm_server: FakeLlmServer) -> AsyncIterator[OpenRouterProvider]:
    config = ProviderConfig(
        api_key=SecretStr("sk-or-test"),
        base_url=fake_llm_server.url + "/api/v1",
        site_url="https://opencrab.example",
        app_name="OpenCrab",
    )
    p = OpenRouterProvider(config, name="openrouter")
    yield p
    await p.aclose()


def test_defaults() -> None:
    provider = OpenRouterProvider(ProviderConfig(api_key=SecretStr("k")))
    assert provider.name == "openrouter"
    assert provider.base_url() == "https://openrouter.ai/api/v1"
    assert provider.default_headers() == {}
    assert provider.is_configured() is True
    assert OpenRouterProvider(ProviderConfig()).is_configured() is False
    # api_version is an Azure setting; OpenRouter never becomes Azure
    assert OpenRouterProvider(ProviderConfig(api_version="2024-10-21")).is_azure is False


async def test_headers_usage_accounting_and_cost(
    provider: OpenRouterProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "Hello from Claude"})))

    reply = await provider.chat_completion(ask(max_tokens=64))

    assert reply.text == "Hello from Claude"
    assert reply.provider == "openrouter"
    assert reply.model == MODEL
    assert reply.cost_usd == pytest.approx(0.00492)
    assert reply.usage.input_tokens == 1200
    assert reply.usage.cache_read_tokens == 1000
    assert reply.usage.cache_write_tokens == 150
    assert reply.usage.output_tokens == 80
    assert reply.usage.reasoning_tokens == 20
    assert reply.usage.raw == USAGE
    sent = fake_llm_server.requests[-1]
    assert sent.path == CHAT
    assert sent.headers["http-referer"] == "https://opencrab.example"
    assert sent.headers["x-title"] == "OpenCrab"
    assert sent.headers["authorization"] == "Bearer sk-or-test"
    assert sent.json == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 64,
        "stream": False,
        "usage": {"include": True},
    }


async def test_no_cost_when_not_reported(
    provider: OpenRouterProvider, fake_llm_server: FakeLlmServer
) -> None:
    body = completion({"content": "ok"})
    body["usage"] = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    fake_llm_server.reply(CHAT, Reply(json=body))
    reply = await provider.chat_completion(ask())
    assert reply.cost_usd is None
    assert reply.usage.total_tokens == 6


async def test_streamed_tool_call_with_cost(
    provider: OpenRouterProvider, fake_llm_server: FakeLlmServer
) -> None:
    first = {
        "index": 0,
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": ""},
    }
    events: list[Any] = [
        chunk({"role": "assistant", "content": "", "reasoning": "Need the docs."}),
        chunk({"tool_calls": [first]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "cr'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'abs"}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(usage=USAGE),
        "[DONE]",
    ]
    fake_llm_server.reply(CHAT, Reply(sse=events))
    tool = ToolDefinition(name="lookup", parameters={"type": "object"})

    chunks = [c async for c in provider.chat_completion_stream(ask(tools=[tool]))]

    assert chunks[0].reasoning == "Need the docs."
    assert chunks[-1].cost_usd == pytest.approx(0.00492)
    assert all(c.cost_usd is None for c in chunks[:-1])
    acc = StreamAccumulator(provider="openrouter", model=MODEL)
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert reply.tool_calls == [
        ToolCall(
            id="toolu_1", name="lookup", arguments={"q": "crabs"}, raw_arguments='{"q": "crabs"}'
        )
    ]
    assert acc.reasoning == "Need the docs."
    assert reply.cost_usd == pytest.approx(0.00492)
    assert reply.usage.cache_write_tokens == 150
    sent = fake_llm_server.requests[-1].json
    assert sent["usage"] == {"include": True}
    assert sent["stream_options"] == {"include_usage": True}


async def test_error_event_mid_stream(
    provider: OpenRouterProvider, fake_llm_server: FakeLlmServer
) -> None:
    events: list[Any] = [
        chunk({"content": "Partial"}),
        {"error": {"code": 502, "message": "Provider returned error"}},
    ]
    fake_llm_server.reply(CHAT, Reply(sse=events))
    with pytest.raises(ProviderServerError, match="Provider returned error") as caught:
        _ = [c async for c in provider.chat_completion_stream(ask())]
    assert caught.value.status == 502
    assert caught.value.provider == "openrouter"


async def test_documented_mid_stream_error_chunk(
    provider: OpenRouterProvider, fake_llm_server: FakeLlmServer
) -> None:
    """OpenRouter's documented shape: a chunk with a string `error.code` and finish "error"."""
    failed = chunk({"content": ""}, finish="error")
    failed["error"] = {"code": "server_error", "message": "Provider disconnected unexpectedly"}
    fake_llm_server.reply(CHAT, Reply(sse=[chunk({"content": "Partial"}), failed]))
    seen: list[str] = []

    with pytest.raises(ProviderServerError) as caught:
        await collect_texts(provider, ask(), seen)

    assert seen == ["Partial"]
    assert str(caught.value) == (
        "openrouter: error event in the stream: Provider disconnected unexpectedly"
    )
    assert (caught.value.status, caught.value.retryable) == (None, True)


@pytest.mark.parametrize(
    ("code", "cls", "retryable"),
    [
        (502, ProviderServerError, True),
        (429, RateLimited, True),
        (400, ProviderBadRequest, False),
        ("server_error", ProviderServerError, True),
    ],
)
async def test_error_in_a_200_body(
    provider: OpenRouterProvider,
    fake_llm_server: FakeLlmServer,
    code: int | str,
    cls: type[LlmError],
    retryable: bool,
) -> None:
    """Once the model has started, OpenRouter reports a failure with status 200 in the body."""
    body = {"error": {"code": code, "message": "Provider returned error", "metadata": {}}}
    fake_llm_server.reply(CHAT, Reply(json=body))

    with pytest.raises(LlmError) as caught:
        await provider.chat_completion(ask())

    assert type(caught.value) is cls
    assert caught.value.retryable is retryable
    assert caught.value.status == (code if isinstance(code, int) else None)
    assert "Provider returned error" in str(caught.value)
    assert caught.value.provider == "openrouter"


async def test_stream_cut(provider: OpenRouterProvider, fake_llm_server: FakeLlmServer) -> None:
    events: list[Any] = [chunk({"content": "a"}), chunk({"content": "b"}), chunk({}, finish="stop")]
    fake_llm_server.reply(CHAT, Reply(sse=events, cut_after=1))
    with pytest.raises(StreamInterrupted):
        _ = [c async for c in provider.chat_completion_stream(ask())]


async def test_auth_error(provider: OpenRouterProvider, fake_llm_server: FakeLlmServer) -> None:
    body = {"error": {"code": 401, "message": "No auth credentials found"}}
    fake_llm_server.reply(CHAT, Reply(status=401, json=body))
    with pytest.raises(ProviderAuthError, match="No auth credentials found"):
        await provider.chat_completion(ask())


async def test_models_list(provider: OpenRouterProvider, fake_llm_server: FakeLlmServer) -> None:
    listed = [
        {
            "id": "openai/gpt-4o",
            "canonical_slug": "openai/gpt-4o",
            "name": "OpenAI: GPT-4o",
            "created": 1715367049,
            "context_length": 128000,
            "architecture": {
                "modality": "text+image->text",
                "input_modalities": ["text", "image", "file"],
                "output_modalities": ["text"],
                "tokenizer": "GPT",
            },
            "pricing": {"prompt": "0.0000025", "completion": "0.00001"},
            "top_provider": {"context_length": 128000, "max_completion_tokens": 16384},
            "supported_parameters": ["max_tokens", "temperature", "tools", "tool_choice"],
        },
        {
            "id": "sao10k/l3-euryale-70b",
            "name": "Sao10k: Llama 3 Euryale 70B",
            "created": 1718668800,
            "context_length": 8192,
            "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
            "pricing": {"prompt": "0.00000148", "completion": "0.00000148"},
            "supported_parameters": ["max_tokens", "temperature", "stop"],
        },
    ]
    fake_llm_server.reply("/api/v1/models", Reply(json={"data": listed}))

    models = await provider.available_models()

    assert [(m.id, m.context_window, m.supports_vision, m.supports_functions) for m in models] == [
        ("openai/gpt-4o", 128000, True, True),
        ("sao10k/l3-euryale-70b", 8192, False, False),
    ]
    assert {m.provider for m in models} == {"openrouter"}
    assert fake_llm_server.requests[-1].path == "/api/v1/models"
