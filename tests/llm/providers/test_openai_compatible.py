"""The provider test matrix for OpenRouter and llama.cpp's `llama-server`.

Both providers subclass OpenAIProvider and call the real `openai` SDK; each test here runs
once per provider against the fake server speaking that provider's documented wire:

- OpenRouter (openrouter.ai/docs: API reference, usage accounting, errors): the API at
  `/api/v1`, a Bearer key, the `HTTP-Referer` / `X-Title` attribution headers,
  `max_tokens`, and `"usage": {"include": true}` in every request. Its usage object
  carries `cost` (USD), `prompt_tokens_details.cached_tokens` / `cache_write_tokens` and
  `completion_tokens_details.reasoning_tokens`; a stream ends with a usage-only chunk
  (empty `choices`). Errors are `{"error": {"code", "message", "metadata"}}` with that
  status, or, once the model has started, status 200 with the error in the body.
- llama.cpp (tools/server/README.md): the OpenAI-compatible API at `<root>/v1`, no key
  (a placeholder Bearer is sent), `max_tokens`, no OpenRouter fields. Its usage carries
  `prompt_tokens_details.cached_tokens` (prompt tokens reused from the KV cache) and no
  reasoning-token count at all, plus `timings`; with `stream_options.include_usage` a
  stream ends with a usage-only chunk that also holds `timings`. Errors are
  `{"error": {"code", "message", "type"}}`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import SecretStr

from opencrab.config.models import ProviderConfig
from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderAuthError,
    ProviderServerError,
    ProviderTimeout,
    RateLimited,
    StreamInterrupted,
)
from opencrab.llm.providers.llamacpp import LlamaCppProvider
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.llm.providers.openrouter import OpenRouterProvider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolDefinition,
    Usage,
)
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.llm.providers.streams import collect, collect_texts

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
LLAMA_TIMINGS = {
    "cache_n": 1024,
    "prompt_n": 176,
    "prompt_ms": 95.1,
    "predicted_n": 96,
    "predicted_ms": 1210.4,
}
LLAMA_ERROR_TYPES = {401: "authentication_error", 503: "unavailable_error"}


@dataclass(frozen=True)
class Wire:
    """What one OpenAI-compatible server expects and sends."""

    name: str
    cls: type[OpenAIProvider]
    config: Callable[[str], ProviderConfig]  # the fake server's URL → the provider's config
    prefix: str  # where the API lives on the server
    model: str
    authorization: str
    headers: dict[str, str]  # sent with every request besides the authorization
    body_extra: dict[str, Any]  # added to every chat request body
    reply_extra: dict[str, Any]  # fields the server adds to every reply or chunk
    usage: dict[str, Any]  # a usage object with cache (and reasoning) counts
    expected_usage: Usage
    cost: float | None  # what `usage` says the call cost
    error_body: Callable[[int, str], dict[str, Any]]
    reasoning_field: str  # where a reply's reasoning text goes (no neutral place when whole)
    final_extra: dict[str, Any] = field(default_factory=dict)  # on a reply and a stream's end

    @property
    def chat(self) -> str:
        return f"{self.prefix}/chat/completions"

    def provider(self, url: str) -> OpenAIProvider:
        return self.cls(self.config(url), name=self.name)


OPENROUTER_USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 80,
    "total_tokens": 1280,
    "cost": 0.00492,
    "is_byok": False,
    "cost_details": {"upstream_inference_cost": None},
    "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 150, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 20},
}
LLAMA_USAGE = {
    "completion_tokens": 96,
    "prompt_tokens": 1200,
    "total_tokens": 1296,
    "prompt_tokens_details": {"cached_tokens": 1024},
}

OPENROUTER = Wire(
    name="openrouter",
    cls=OpenRouterProvider,
    config=lambda url: ProviderConfig(
        api_key=SecretStr("sk-or-test"),
        base_url=url + "/api/v1",
        site_url="https://opencrab.example",
        app_name="OpenCrab",
    ),
    prefix="/api/v1",
    model="anthropic/claude-sonnet-4.5",
    authorization="Bearer sk-or-test",
    headers={"http-referer": "https://opencrab.example", "x-title": "OpenCrab"},
    body_extra={"usage": {"include": True}},
    reply_extra={"provider": "Anthropic"},
    usage=OPENROUTER_USAGE,
    expected_usage=Usage(
        input_tokens=1200,
        output_tokens=80,
        total_tokens=1280,
        cache_read_tokens=1000,
        cache_write_tokens=150,
        reasoning_tokens=20,
        raw=OPENROUTER_USAGE,
    ),
    cost=0.00492,
    error_body=lambda status, text: {"error": {"code": status, "message": text}},
    reasoning_field="reasoning",
)
LLAMACPP = Wire(
    name="llamacpp",
    cls=LlamaCppProvider,
    config=lambda url: ProviderConfig(base_url=url),  # the server root, no key
    prefix="/v1",
    model="qwen3-4b-instruct-q4_k_m.gguf",
    authorization="Bearer sk-no-key-required",
    headers={},
    body_extra={},
    reply_extra={"system_fingerprint": "b6500-abcdef"},
    usage=LLAMA_USAGE,
    # no reasoning count on this wire: reasoning tokens are inside completion_tokens
    expected_usage=Usage(
        input_tokens=1200,
        output_tokens=96,
        total_tokens=1296,
        cache_read_tokens=1024,
        cache_write_tokens=0,
        reasoning_tokens=0,
        raw=LLAMA_USAGE,
    ),
    cost=None,
    error_body=lambda status, text: {
        "error": {
            "code": status,
            "message": text,
            "type": LLAMA_ERROR_TYPES.get(status, "server_error"),
        }
    },
    reasoning_field="reasoning_content",
    final_extra={"timings": LLAMA_TIMINGS},
)


# ------------------------------------------------------------------ builders
def completion(
    wire: Wire,
    message: dict[str, Any],
    *,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A chat.completion body as the server sends it."""
    return {
        "id": "chatcmpl-compat",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": wire.model,
        "choices": [
            {
                "index": 0,
                "logprobs": None,
                "finish_reason": finish,
                "message": {"role": "assistant", **message},
            }
        ],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        **wire.reply_extra,
    }


def chunk(
    wire: Wire, delta: dict[str, Any] | None = None, *, finish: str | None = None
) -> dict[str, Any]:
    """A chat.completion.chunk with one choice."""
    return {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "model": wire.model,
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **wire.reply_extra,
    }


def usage_chunk(wire: Wire) -> dict[str, Any]:
    """The last chunk of a stream that asked for usage: no choices, the usage object."""
    return {
        **chunk(wire),
        "choices": [],
        "usage": wire.usage,
        **wire.final_extra,
    }


def text_stream(wire: Wire, *pieces: str) -> list[Any]:
    """A whole streamed text reply: role delta, one chunk per piece, finish, usage, [DONE]."""
    return [
        chunk(wire, {"role": "assistant", "content": ""}),
        *[chunk(wire, {"content": piece}) for piece in pieces],
        chunk(wire, finish="stop"),
        usage_chunk(wire),
        "[DONE]",
    ]


def ask(wire: Wire, *messages: Message, **fields: Any) -> ChatRequest:
    return ChatRequest(model=wire.model, messages=list(messages) or [Message.user("Hi")], **fields)


def accumulate(wire: Wire, chunks: list[ChatChunk]) -> StreamAccumulator:
    acc = StreamAccumulator(provider=wire.name, model=wire.model)
    for c in chunks:
        acc.add(c)
    return acc


@pytest.fixture(params=[OPENROUTER, LLAMACPP], ids=lambda wire: wire.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    value: Wire = request.param
    return value


@pytest.fixture
async def provider(wire: Wire, fake_llm_server: FakeLlmServer) -> AsyncIterator[OpenAIProvider]:
    p = wire.provider(fake_llm_server.url)
    yield p
    await p.aclose()


# ------------------------------------------------------------------ replies
async def test_plain_reply(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(wire.chat, Reply(json=completion(wire, {"content": "Hello there"})))
    request = ask(
        wire,
        Message.system("Be brief."),
        Message.user("Hi"),
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )

    reply = await provider.chat_completion(request)

    assert reply.text == "Hello there"
    assert (reply.id, reply.model, reply.provider) == ("chatcmpl-compat", wire.model, wire.name)
    assert (reply.finish_reason, reply.raw_finish_reason) == ("stop", "stop")
    assert reply.tool_calls == []
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.total_tokens) == (
        12,
        3,
        15,
    )
    assert reply.cost_usd is None  # this usage reports no cost
    sent = fake_llm_server.requests[-1]
    assert (sent.method, sent.path) == ("POST", wire.chat)
    assert sent.headers["authorization"] == wire.authorization
    for name in ("http-referer", "x-title"):
        assert sent.headers.get(name) == wire.headers.get(name)
    assert sent.json == {
        "model": wire.model,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "temperature": 0.2,
        "max_tokens": 50,
        "stop": ["END"],
        "stream": False,
        **wire.body_extra,
    }


async def test_streamed_reply(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(wire.chat, Reply(sse=text_stream(wire, "Hel", "lo")))

    chunks = await collect(provider, ask(wire, max_tokens=20))

    assert [c.text for c in chunks] == ["Hel", "lo", "", ""]
    assert [c.finish_reason for c in chunks] == [None, None, "stop", None]
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage == wire.expected_usage  # the server's own count, not an estimate
    assert chunks[-1].cost_usd == wire.cost
    reply = accumulate(wire, chunks).response()
    assert (reply.text, reply.finish_reason, reply.id) == ("Hello", "stop", "chatcmpl-stream")
    assert reply.usage == wire.expected_usage
    assert reply.cost_usd == wire.cost
    assert [r.path for r in fake_llm_server.requests] == [wire.chat]
    sent = fake_llm_server.requests[-1]
    assert sent.headers["authorization"] == wire.authorization
    assert sent.json == {
        "model": wire.model,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 20,
        "stream": True,
        "stream_options": {"include_usage": True},
        **wire.body_extra,
    }


# ------------------------------------------------------------------ tools
async def test_tool_call_round_trip(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    arguments = '{"city": "Paris"}'
    call = {
        "id": "call_w1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }
    fake_llm_server.reply(
        wire.chat,
        Reply(json=completion(wire, {"content": None, "tool_calls": [call]}, finish="tool_calls")),
        Reply(json=completion(wire, {"content": "It is 18 °C in Paris."})),
    )
    question = Message.user("Weather in Paris?")

    first = await provider.chat_completion(ask(wire, question, tools=[WEATHER], tool_choice="auto"))

    assert first.finish_reason == "tool_calls"
    assert first.text == ""
    assert first.tool_calls == [
        ToolCall(
            id="call_w1", name="get_weather", arguments={"city": "Paris"}, raw_arguments=arguments
        )
    ]
    sent = fake_llm_server.requests[-1].json
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert sent["tool_choice"] == "auto"

    history = [question, first.message, Message.tool("call_w1", '{"temp_c": 18}')]
    final = await provider.chat_completion(ask(wire, *history, tools=[WEATHER]))

    assert (final.text, final.finish_reason) == ("It is 18 °C in Paris.", "stop")
    sent = fake_llm_server.requests[-1].json
    assert sent["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp_c": 18}'},
    ]
    assert {k: v for k, v in sent.items() if k not in ("messages", "tools")} == {
        "model": wire.model,
        "stream": False,
        **wire.body_extra,
    }  # no tool_choice: none was asked for


# ------------------------------------------------------------------ images and usage
async def test_image_input(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(wire.chat, Reply(json=completion(wire, {"content": "A crab."})))
    data_url = "data:image/png;base64,iVBORw0KGgo="
    message = Message(
        role="user",
        content=[
            TextPart(text="What is in these?"),
            ImagePart(url=data_url),
            ImagePart(url="https://example.com/crab.jpg", detail="low"),
        ],
    )

    reply = await provider.chat_completion(ask(wire, message))

    assert reply.text == "A crab."
    assert fake_llm_server.requests[-1].json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": data_url}},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/crab.jpg", "detail": "low"},
                },
            ],
        }
    ]


async def test_usage_with_cached_and_reasoning_tokens(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    """Cached tokens are inside the prompt count, reasoning inside the completion count.

    llama-server reports no reasoning-token count (only `prompt_tokens_details`), so even
    a reply with `reasoning_content` maps to reasoning_tokens 0 there.
    """
    message = {"content": "42", wire.reasoning_field: "6 × 7 is 42."}
    body = completion(wire, message, usage=wire.usage) | wire.final_extra
    fake_llm_server.reply(wire.chat, Reply(json=body))

    reply = await provider.chat_completion(ask(wire))

    assert reply.text == "42"
    assert reply.usage == wire.expected_usage
    assert reply.cost_usd == wire.cost


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (401, ProviderAuthError, False),
        (429, RateLimited, True),
        (500, ProviderServerError, True),
        (503, ProviderServerError, True),
    ],
)
async def test_http_errors(
    wire: Wire,
    provider: OpenAIProvider,
    fake_llm_server: FakeLlmServer,
    status: int,
    cls: type[LlmError],
    retryable: bool,
) -> None:
    fake_llm_server.reply(
        wire.chat, Reply(status=status, json=wire.error_body(status, f"scripted {status}"))
    )

    with pytest.raises(LlmError) as plain:
        await provider.chat_completion(ask(wire))
    with pytest.raises(LlmError) as streamed:
        await collect(provider, ask(wire))

    for error in (plain.value, streamed.value):
        assert type(error) is cls
        assert error.retryable is retryable
        assert (error.status, error.provider, error.model) == (status, wire.name, wire.model)
        assert str(error) == f"{wire.name}: HTTP {status}: scripted {status}"
    assert len(fake_llm_server.requests) == 2  # no SDK retries


async def test_error_body_that_is_not_json(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    """A proxy in front of the server answers with a page; its text is the message."""
    page = Reply(status=502, body=b"<html>502 Bad Gateway</html>", content_type="text/html")
    fake_llm_server.reply(wire.chat, page)

    with pytest.raises(ProviderServerError) as caught:
        await provider.chat_completion(ask(wire))

    assert caught.value.status == 502
    assert str(caught.value) == f"{wire.name}: HTTP 502: <html>502 Bad Gateway</html>"


async def test_timeout(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(wire.chat, Reply(delay=2, json=completion(wire, {"content": "late"})))
    started = time.monotonic()

    with pytest.raises(ProviderTimeout) as caught:
        await provider.chat_completion(ask(wire, timeout=0.3))

    assert time.monotonic() - started < 1.5
    assert caught.value.retryable is True
    assert (caught.value.provider, caught.value.model) == (wire.name, wire.model)


async def test_stream_timeout_before_the_first_event(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(wire.chat, Reply(delay=2, sse=text_stream(wire, "late")))
    started = time.monotonic()

    with pytest.raises(ProviderTimeout) as caught:
        await collect(provider, ask(wire, timeout=0.3))

    assert time.monotonic() - started < 1.5
    assert (caught.value.retryable, caught.value.provider) == (True, wire.name)


async def test_stream_that_goes_silent_times_out(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    events = [chunk(wire, {"content": "Once"}), chunk(wire, {"content": " upon"}), "[DONE]"]
    fake_llm_server.reply(wire.chat, Reply(sse=events, event_delay=2))
    seen: list[str] = []
    started = time.monotonic()

    with pytest.raises(ProviderTimeout) as caught:
        await collect_texts(provider, ask(wire, timeout=0.3), seen)

    assert time.monotonic() - started < 1.5
    assert seen == ["Once"]  # then the server went quiet
    assert (caught.value.retryable, caught.value.provider) == (True, wire.name)
    assert [r.path for r in fake_llm_server.requests] == [wire.chat]  # nothing counted


@pytest.mark.parametrize(
    "body",
    [
        b'{"id": "chatcmpl-1", "choices": [',
        b"[1, 2]",
        b'{"id": "x", "choices": "nope"}',
        b'{"choices": []}',
        b"<html>sign in</html>",
    ],
)
async def test_malformed_body(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer, body: bytes
) -> None:
    fake_llm_server.reply(wire.chat, Reply(body=body, content_type="application/json"))

    with pytest.raises(MalformedResponse) as caught:
        await provider.chat_completion(ask(wire))

    assert caught.value.retryable is True
    assert (caught.value.provider, caught.value.model) == (wire.name, wire.model)


async def test_malformed_stream_event(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    events = [chunk(wire, {"content": "ok"}), "{broken", *text_stream(wire, "never")]
    fake_llm_server.reply(wire.chat, Reply(sse=events))
    seen: list[str] = []

    with pytest.raises(MalformedResponse) as caught:
        await collect_texts(provider, ask(wire), seen)

    assert seen == ["ok"]
    assert (caught.value.retryable, caught.value.provider) == (True, wire.name)


async def test_stream_cut_midway(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    events = text_stream(wire, "Once", " upon", " a time")
    fake_llm_server.reply(wire.chat, Reply(sse=events, cut_after=3))  # role, "Once", " upon"
    seen: list[str] = []

    with pytest.raises(StreamInterrupted, match="broke off") as caught:
        await collect_texts(provider, ask(wire), seen)

    assert seen == ["Once", " upon"]
    assert caught.value.retryable is True
    assert (caught.value.provider, caught.value.model) == (wire.name, wire.model)
    assert [r.path for r in fake_llm_server.requests] == [wire.chat]  # no usage estimate


async def test_stream_ending_without_finish_reason(
    wire: Wire, provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    """A connection closed cleanly before the finish reason (a proxy's idle cut) is no reply."""
    fake_llm_server.reply(wire.chat, Reply(sse=[chunk(wire, {"content": "Once"})]))
    seen: list[str] = []

    with pytest.raises(StreamInterrupted, match="without a finish reason") as caught:
        await collect_texts(provider, ask(wire), seen)

    assert seen == ["Once"]
    assert caught.value.retryable is True
    assert [r.path for r in fake_llm_server.requests] == [wire.chat]
