"""OllamaProvider against a fake server speaking Ollama's native API (/api/chat, NDJSON)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from opencrab.config.models import ProviderConfig
from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnreachable,
    RateLimited,
    StreamInterrupted,
)
from opencrab.llm.providers.ollama import OllamaProvider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatRequest, Message, ModelInfo, ToolCall, ToolDefinition
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.ports import free_port
from tests.llm.providers.streams import collect, collect_texts

MODEL = "llama3.2"
CHAT = "/api/chat"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
COUNTERS = {
    "total_duration": 5_000_000_000,
    "load_duration": 2_000_000,
    "prompt_eval_count": 26,
    "prompt_eval_duration": 130_000_000,
    "eval_count": 9,
    "eval_duration": 400_000_000,
}


def line(
    message: dict[str, Any] | None = None, *, done: bool = False, reason: str = "stop"
) -> dict[str, Any]:
    """A /api/chat reply (non-streamed), or one NDJSON line of a stream."""
    body: dict[str, Any] = {
        "model": MODEL,
        "created_at": "2025-10-01T12:00:00.000000Z",
        "message": {"role": "assistant", "content": "", **(message or {})},
        "done": done,
    }
    if done:
        body |= {"done_reason": reason, **COUNTERS}
    return body


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def ask(*messages: Message, **fields: Any) -> ChatRequest:
    return ChatRequest(model=MODEL, messages=list(messages) or [Message.user("Hi")], **fields)


@pytest.fixture
async def provider(fake_llm_server: FakeLlmServer) -> AsyncIterator[OllamaProvider]:
    p = OllamaProvider(ProviderConfig(base_url=fake_llm_server.url), name="ollama")
    yield p
    await p.aclose()


# ------------------------------------------------------------------ replies
async def test_plain_reply(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(json=line({"content": "Hello there"}, done=True)))
    request = ask(
        Message.system("Be brief."),
        Message.user("Hi"),
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )

    reply = await provider.chat_completion(request)

    assert reply.text == "Hello there"
    assert reply.id.startswith("ollama-")
    assert reply.model == MODEL
    assert reply.provider == "ollama"
    assert reply.finish_reason == "stop"
    assert reply.raw_finish_reason == "stop"
    assert reply.tool_calls == []
    sent = fake_llm_server.requests[-1]
    assert (sent.method, sent.path) == ("POST", CHAT)
    assert "authorization" not in sent.headers
    assert sent.json == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "stream": False,
        "options": {"temperature": 0.2, "num_predict": 50, "stop": ["END"]},
    }


async def test_usage_counters(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    """Ollama's wire has no cached- or reasoning-token field, so both stay 0.

    The final message reports only `prompt_eval_count` (input) and `eval_count` (output,
    thinking included) besides durations; those two are the usage, all six counters its
    `raw`, with or without a streamed `thinking` part.
    """
    whole = line({"content": "ok", "thinking": "Short answer."}, done=True)
    streamed = [line({"thinking": "Short answer."}), line({"content": "ok"}), line(done=True)]
    fake_llm_server.reply(CHAT, Reply(json=whole), Reply(ndjson=streamed))

    reply = await provider.chat_completion(ask())
    chunks = await collect(provider, ask())

    assert reply.text == "ok"
    assert chunks[-1].usage == reply.usage
    usage = reply.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (26, 9, 35)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.reasoning_tokens) == (0, 0, 0)
    assert usage.raw == COUNTERS


async def test_length_finish(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    body = line({"content": "Once upon"}, done=True, reason="length")
    fake_llm_server.reply(CHAT, Reply(json=body))

    reply = await provider.chat_completion(ask(max_tokens=2))

    assert (reply.finish_reason, reply.raw_finish_reason) == ("length", "length")


async def test_streamed_reply(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    lines: list[Any] = [
        line({"thinking": "Greeting back."}),
        line({"content": "Hel"}),
        line({"content": "lo"}),
        line(done=True),
    ]
    fake_llm_server.reply(CHAT, Reply(ndjson=lines))

    chunks = await collect(provider, ask())

    assert fake_llm_server.requests[-1].json["stream"] is True
    assert [(c.reasoning, c.text) for c in chunks[:-1]] == [
        ("Greeting back.", ""),
        ("", "Hel"),
        ("", "lo"),
    ]
    final = chunks[-1]
    assert (final.text, final.finish_reason) == ("", "stop")
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (26, 9)
    assert len({c.id for c in chunks}) == 1
    acc = StreamAccumulator(provider="ollama", model=MODEL)
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert (reply.text, reply.finish_reason, acc.reasoning) == ("Hello", "stop", "Greeting back.")
    assert reply.id.startswith("ollama-")


# ------------------------------------------------------------------ tools
async def test_tool_call_round_trip(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(
        CHAT,
        Reply(json=line({"tool_calls": [call("get_weather", {"city": "Paris"})]}, done=True)),
        Reply(json=line({"content": "It is 18°C in Paris."}, done=True)),
    )
    question = Message.user("Weather in Paris?")

    first = await provider.chat_completion(ask(question, tools=[WEATHER]))

    assert first.finish_reason == "tool_calls"
    assert first.raw_finish_reason == "stop"
    assert first.text == ""
    [tool_call] = first.tool_calls
    assert tool_call.id.startswith("call_")
    assert (tool_call.name, tool_call.arguments, tool_call.raw_arguments) == (
        "get_weather",
        {"city": "Paris"},
        None,
    )
    assert fake_llm_server.requests[-1].json["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]

    history = [question, first.message, Message.tool(tool_call.id, "18°C, sunny")]
    second = await provider.chat_completion(ask(*history, tools=[WEATHER]))

    assert second.text == "It is 18°C in Paris."
    assert second.finish_reason == "stop"
    assert fake_llm_server.requests[-1].json["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "18°C, sunny", "tool_name": "get_weather"},
    ]


async def test_tool_history_details(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    """String arguments are sent as objects; failed tools are marked; "none" drops the tools."""
    fake_llm_server.reply(CHAT, Reply(json=line({"content": "ok"}, done=True)))
    calls = [ToolCall(id="x1", name="read", arguments='{"path": "a.txt"}', raw_arguments="…")]
    history = [
        Message.user("Read it"),
        Message.assistant("Reading.", calls),
        Message.tool("x1", "no such file", is_error=True),
    ]

    await provider.chat_completion(ask(*history, tools=[WEATHER], tool_choice="none"))

    sent = fake_llm_server.requests[-1].json
    assert "tools" not in sent
    assert sent["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [{"function": {"name": "read", "arguments": {"path": "a.txt"}}}],
        },
        {"role": "tool", "content": "ERROR: no such file", "tool_name": "read"},
    ]


async def test_streamed_tool_calls(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    lines: list[Any] = [
        line({"content": "Checking."}),
        line({"tool_calls": [call("get_weather", {"city": "Paris"})]}),
        line({"tool_calls": [call("get_weather", {"city": "Tokyo"})]}),
        line(done=True),
    ]
    fake_llm_server.reply(CHAT, Reply(ndjson=lines))

    chunks = await collect(provider, ask(tools=[WEATHER]))

    deltas = [d for c in chunks for d in c.tool_calls]
    assert [(d.index, d.name, d.arguments) for d in deltas] == [
        (0, "get_weather", '{"city": "Paris"}'),
        (1, "get_weather", '{"city": "Tokyo"}'),
    ]
    assert chunks[-1].finish_reason == "tool_calls"
    acc = StreamAccumulator(provider="ollama", model=MODEL)
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert reply.text == "Checking."
    assert reply.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Tokyo"}),
    ]
    assert all(c.id.startswith("call_") for c in reply.tool_calls)
    assert reply.usage.output_tokens == 9


# ------------------------------------------------------------------ images
async def test_data_url_image(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(json=line({"content": "A crab."}, done=True)))
    image = "data:image/png;base64,iVBORw0KGgo="

    reply = await provider.chat_completion(ask(Message.user("What is this?", images=[image])))

    assert reply.text == "A crab."
    assert fake_llm_server.requests[-1].json["messages"] == [
        {"role": "user", "content": "What is this?", "images": ["iVBORw0KGgo="]}
    ]


async def test_linked_image_is_refused(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    request = ask(Message.user("What is this?", images=["https://example.com/crab.png"]))

    with pytest.raises(ProviderBadRequest, match=r"only inline images.*data:") as caught:
        await provider.chat_completion(request)
    with pytest.raises(ProviderBadRequest, match="only inline images"):
        await collect(provider, request)

    assert caught.value.retryable is False
    assert fake_llm_server.requests == []


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [(401, ProviderAuthError, False), (429, RateLimited, True), (500, ProviderServerError, True)],
)
async def test_http_errors(
    provider: OllamaProvider,
    fake_llm_server: FakeLlmServer,
    status: int,
    cls: type[LlmError],
    retryable: bool,
) -> None:
    fake_llm_server.reply(CHAT, Reply(status=status, json={"error": "went wrong"}))

    with pytest.raises(cls) as caught:
        await provider.chat_completion(ask())
    assert type(caught.value) is cls
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    assert str(caught.value) == f"ollama: HTTP {status}: went wrong"
    with pytest.raises(cls):
        await collect(provider, ask())


async def test_missing_model(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    error = {"error": f'model "{MODEL}" not found, try pulling it first'}
    fake_llm_server.reply(CHAT, Reply(status=404, json=error))

    with pytest.raises(ProviderBadRequest, match=f"ollama pull {MODEL}") as caught:
        await provider.chat_completion(ask())

    assert caught.value.status == 404
    assert f"model '{MODEL}' is not on {fake_llm_server.url}" in str(caught.value)


async def test_timeout(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(delay=2, json=line({"content": "late"}, done=True)))

    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        await provider.chat_completion(ask(timeout=0.3))
    with pytest.raises(ProviderTimeout):
        await collect(provider, ask(timeout=0.3))

    assert caught.value.retryable is True
    assert time.monotonic() - started < 1.8


async def test_malformed_body(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    broken = Reply(body=b'{"message": {', content_type="application/json")
    fake_llm_server.reply(CHAT, broken, Reply(json={"done": True}))

    with pytest.raises(MalformedResponse, match="expected a JSON object") as caught:
        await provider.chat_completion(ask())
    assert caught.value.retryable is True
    with pytest.raises(MalformedResponse, match="no message"):
        await provider.chat_completion(ask())


async def test_malformed_stream_line(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(ndjson=[line({"content": "a"}), "{oops", line(done=True)]))

    with pytest.raises(MalformedResponse, match="oops"):
        await collect(provider, ask())


async def test_stream_cut_mid_way(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    lines: list[Any] = [
        line({"content": "One"}),
        line({"content": " two"}),
        line({"content": " three"}),
        line(done=True),
    ]
    fake_llm_server.reply(CHAT, Reply(ndjson=lines, cut_after=2))
    seen: list[str] = []

    with pytest.raises(StreamInterrupted, match="broke off") as caught:
        await collect_texts(provider, ask(), seen)

    assert seen == ["One", " two"]
    assert caught.value.retryable is True


async def test_stream_ending_without_done(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(ndjson=[line({"content": "One"})]))

    with pytest.raises(StreamInterrupted, match="before its done line"):
        await collect(provider, ask())


async def test_error_line_in_stream(
    provider: OllamaProvider, fake_llm_server: FakeLlmServer
) -> None:
    lines: list[Any] = [line({"content": "One"}), {"error": "llama runner process has terminated"}]
    fake_llm_server.reply(CHAT, Reply(ndjson=lines))
    seen: list[str] = []

    with pytest.raises(ProviderServerError, match="runner process has terminated") as caught:
        await collect_texts(provider, ask(), seen)

    assert seen == ["One"]
    assert caught.value.retryable is True


async def test_unreachable_server() -> None:
    provider = OllamaProvider(ProviderConfig(base_url=f"http://127.0.0.1:{free_port()}"))
    try:
        assert provider.is_configured() is True
        with pytest.raises(ProviderUnreachable) as caught:
            await provider.chat_completion(ask())
        assert caught.value.retryable is True
        with pytest.raises(ProviderUnreachable):
            await collect(provider, ask())
        assert await provider.health_check() is False
    finally:
        await provider.aclose()


# ------------------------------------------------------------------ models and health
async def test_available_models(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    tags = {
        "models": [
            {
                "name": "llama3.2:latest",
                "model": "llama3.2:latest",
                "size": 2_019_393_189,
                "details": {"family": "llama", "families": ["llama"]},
            },
            {
                "name": "llava:7b",
                "model": "llava:7b",
                "details": {"family": "llama", "families": ["llama", "clip"]},
            },
        ]
    }
    fake_llm_server.reply("/api/tags", Reply(json=tags))

    models = await provider.available_models()

    assert models == [
        ModelInfo(id="llama3.2:latest", provider="ollama"),
        ModelInfo(id="llava:7b", provider="ollama", supports_vision=True),
    ]
    assert fake_llm_server.requests[-1].method == "GET"


async def test_health_check(provider: OllamaProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply("/api/version", Reply(json={"version": "0.12.6"}))
    assert await provider.health_check() is True
    assert fake_llm_server.requests[-1].path == "/api/version"

    fake_llm_server.reset()
    fake_llm_server.reply("/api/version", Reply(status=500, json={"error": "broken"}))
    assert await provider.health_check() is False
    fake_llm_server.reply("/api/version", Reply(delay=2, json={"version": "0.12.6"}))
    impatient = OllamaProvider(ProviderConfig(base_url=fake_llm_server.url, timeout_secs=0.2))
    try:
        assert await impatient.health_check() is False
    finally:
        await impatient.aclose()
