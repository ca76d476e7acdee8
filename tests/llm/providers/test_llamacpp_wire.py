"""LlamaCppProvider through the real `openai` SDK against a fake llama-server (no key)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from opencrab.config.models import ProviderConfig
from opencrab.errors import ProviderServerError, StreamInterrupted
from opencrab.llm.providers.llamacpp import LlamaCppProvider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatRequest, Message, ToolDefinition, Usage
from tests.fakes.llm_server import FakeLlmServer, Reply

CHAT = "/v1/chat/completions"
MODEL = "qwen2.5-1.5b-instruct-q4_k_m.gguf"
TIMINGS = {"prompt_n": 14, "prompt_ms": 30.2, "predicted_n": 4, "predicted_ms": 41.0}


def completion(message: dict[str, Any], *, finish: str = "stop") -> dict[str, Any]:
    return {
        "choices": [
            {"finish_reason": finish, "index": 0, "message": {"role": "assistant", **message}}
        ],
        "created": 1_760_000_000,
        "model": MODEL,
        "system_fingerprint": "b6500-abcdef",
        "object": "chat.completion",
        "usage": {"completion_tokens": 4, "prompt_tokens": 14, "total_tokens": 18},
        "id": "chatcmpl-llama",
        "timings": TIMINGS,
    }


def chunk(delta: dict[str, Any], *, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
        "created": 1_760_000_000,
        "id": "chatcmpl-llama",
        "model": MODEL,
        "system_fingerprint": "b6500-abcdef",
        "object": "chat.completion.chunk",
        **extra,
    }


@pytest.fixture
async def provider(fake_llm_server: FakeLlmServer) -> AsyncIterator[LlamaCppProvider]:
    p = LlamaCppProvider(ProviderConfig(base_url=fake_llm_server.url), name="llamacpp")
    yield p
    await p.aclose()


def test_defaults_need_no_key() -> None:
    provider = LlamaCppProvider(ProviderConfig())
    assert provider.is_configured() is True
    assert provider.root_url() == "http://localhost:8080"
    assert provider.base_url() == "http://localhost:8080/v1"
    trailing = LlamaCppProvider(ProviderConfig(base_url="http://gpu-box:9000/v1/"))
    assert trailing.base_url() == "http://gpu-box:9000/v1"


async def test_plain_reply_without_key(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "Hello!"})))

    reply = await provider.chat_completion(
        ChatRequest(model="local", messages=[Message.user("Hi")], max_tokens=32)
    )

    assert reply.text == "Hello!"
    assert reply.provider == "llamacpp"
    assert reply.model == MODEL
    assert reply.usage == Usage.of(
        14, 4, raw={"completion_tokens": 4, "prompt_tokens": 14, "total_tokens": 18}
    )
    sent = fake_llm_server.requests[-1]
    assert sent.path == CHAT
    assert sent.headers["authorization"] == "Bearer sk-no-key-required"
    assert sent.json == {
        "model": "local",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 32,
        "stream": False,
    }


async def test_tool_call_without_type_or_id(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    call = {"function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    message = {"content": None, "tool_calls": [call]}
    fake_llm_server.reply(CHAT, Reply(json=completion(message, finish="tool_calls")))

    reply = await provider.chat_completion(
        ChatRequest(model="local", messages=[Message.user("2+3?")])
    )

    assert reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_0", "add", {"a": 2, "b": 3})
    ]


async def test_configured_key_is_sent(fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "ok"})))
    provider = LlamaCppProvider(
        ProviderConfig(api_key=SecretStr("server-key"), base_url=fake_llm_server.url + "/v1")
    )
    try:
        await provider.chat_completion(ChatRequest(model="local", messages=[Message.user("x")]))
    finally:
        await provider.aclose()
    assert fake_llm_server.requests[-1].headers["authorization"] == "Bearer server-key"
    assert fake_llm_server.requests[-1].path == CHAT


async def test_streamed_reasoning_tool_call_and_usage(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    call = {
        "index": 0,
        "id": "Xk2pQ",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 2, '},
    }
    usage = {"completion_tokens": 21, "prompt_tokens": 95, "total_tokens": 116}
    events: list[Any] = [
        chunk({"role": "assistant", "content": None}),
        chunk({"reasoning_content": "Add them."}),
        chunk({"tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"b": 3}'}}]}),
        chunk({}, finish="tool_calls", usage=usage, timings=TIMINGS),
        "[DONE]",
    ]
    fake_llm_server.reply(CHAT, Reply(sse=events))
    tool = ToolDefinition(name="add", parameters={"type": "object"})
    request = ChatRequest(model="local", messages=[Message.user("2+3?")], tools=[tool])

    chunks = [c async for c in provider.chat_completion_stream(request)]

    assert [c.reasoning for c in chunks] == ["Add them.", "", "", ""]
    assert chunks[-1].finish_reason == "tool_calls"
    assert chunks[-1].usage == Usage.of(95, 21, raw=usage)
    acc = StreamAccumulator(provider="llamacpp", model="local")
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("Xk2pQ", "add", {"a": 2, "b": 3})
    ]


async def test_stream_cut(provider: LlamaCppProvider, fake_llm_server: FakeLlmServer) -> None:
    events: list[Any] = [chunk({"content": "a"}), chunk({"content": "b"}), "[DONE]"]
    fake_llm_server.reply(CHAT, Reply(sse=events, cut_after=1))
    request = ChatRequest(model="local", messages=[Message.user("Hi")])
    with pytest.raises(StreamInterrupted) as caught:
        _ = [c async for c in provider.chat_completion_stream(request)]
    assert caught.value.provider == "llamacpp"


async def test_server_error(provider: LlamaCppProvider, fake_llm_server: FakeLlmServer) -> None:
    body = {"error": {"code": 500, "message": "failed to parse grammar", "type": "server_error"}}
    fake_llm_server.reply(CHAT, Reply(status=500, json=body))
    with pytest.raises(ProviderServerError, match="failed to parse grammar"):
        await provider.chat_completion(ChatRequest(model="local", messages=[Message.user("x")]))


async def test_models(provider: LlamaCppProvider, fake_llm_server: FakeLlmServer) -> None:
    meta = {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 32768, "n_embd": 1536}
    listed = [{"id": MODEL, "object": "model", "created": 1, "owned_by": "llamacpp", "meta": meta}]
    fake_llm_server.reply("/v1/models", Reply(json={"object": "list", "data": listed}))

    models = await provider.available_models()

    assert [(m.id, m.provider, m.context_window) for m in models] == [(MODEL, "llamacpp", 32768)]


async def test_health(provider: LlamaCppProvider, fake_llm_server: FakeLlmServer) -> None:
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    fake_llm_server.reply("/health", Reply(status=503, json=loading), Reply(json={"status": "ok"}))
    assert await provider.health_check() is False
    assert await provider.health_check() is True
    assert [r.path for r in fake_llm_server.requests] == ["/health", "/health"]


async def test_health_falls_back_to_models(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    # no /health scripted: the fake answers 404, as a server without the route would
    fake_llm_server.reply("/v1/models", Reply(json={"object": "list", "data": []}))
    assert await provider.health_check() is True
    assert [r.path for r in fake_llm_server.requests] == ["/health", "/v1/models"]


def plain_stream() -> list[Any]:
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({"content": "!"}),
        chunk({}, finish="stop"),
        "[DONE]",
    ]


async def test_stream_without_usage_counts_with_llama_server_tokenizer(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(sse=plain_stream()))
    fake_llm_server.reply("/tokenize", Reply(json={"tokens": [9906, 11, 1917, 0, 13]}))
    request = ChatRequest(model="local", messages=[Message.system("Be brief."), Message.user("Hi")])

    chunks = [c async for c in provider.chat_completion_stream(request)]

    assert "".join(c.text for c in chunks) == "Hello!"
    assert chunks[-1].usage == Usage.of(
        5, 3, raw={"estimated": True, "method": "tokenize", "streamed_deltas": 3}
    )
    # llama-cpp-python's route is tried first (404 here), then llama-server's
    paths = [r.path for r in fake_llm_server.requests]
    assert paths == [CHAT, "/extras/tokenize/count", "/tokenize"]
    assert fake_llm_server.requests[-1].json == {"content": "Be brief.\nHi"}


async def test_stream_without_usage_or_tokenizer_estimates_from_length(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(sse=plain_stream()))
    request = ChatRequest(model="local", messages=[Message.user("x" * 41)])

    chunks = [c async for c in provider.chat_completion_stream(request)]

    assert chunks[-1].usage == Usage.of(
        11, 3, raw={"estimated": True, "method": "characters", "streamed_deltas": 3}
    )


async def test_stream_with_server_usage_is_not_recounted(
    provider: LlamaCppProvider, fake_llm_server: FakeLlmServer
) -> None:
    usage = {"completion_tokens": 3, "prompt_tokens": 9, "total_tokens": 12}
    events = plain_stream()
    events[-2] = chunk({}, finish="stop", usage=usage)
    fake_llm_server.reply(CHAT, Reply(sse=events))
    request = ChatRequest(model="local", messages=[Message.user("Hi")])

    chunks = [c async for c in provider.chat_completion_stream(request)]

    assert [c.usage for c in chunks if c.usage] == [Usage.of(9, 3, raw=usage)]
    assert [r.path for r in fake_llm_server.requests] == [CHAT]
