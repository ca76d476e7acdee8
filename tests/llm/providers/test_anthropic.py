"""AnthropicProvider through the real `anthropic` SDK against a fake Messages API server."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from opencrab.config.models import ProviderConfig
from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderNotConfigured,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnreachable,
    RateLimited,
    StreamInterrupted,
)
from opencrab.llm.providers.anthropic import AnthropicProvider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    Message,
    ModelInfo,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from tests.fakes.llm_server import FakeLlmServer, Reply, SseEvent
from tests.llm.providers.streams import collect, collect_texts

MESSAGES = "/v1/messages"
MODELS = "/v1/models"
MODEL = "claude-haiku-4-5"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
)
PNG = (  # a 1×1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def message(
    content: list[dict[str, Any]],
    *,
    stop: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Message body as Anthropic sends it."""
    return {
        "id": "msg_01abc",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 3},
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "get_weather", "input": arguments}


def tool_result(call_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


def error_body(kind: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_1"}


def ev(name: str, **data: Any) -> SseEvent:
    """One named SSE event whose data carries the same `type`."""
    return (name, {"type": name, **data})


def stream_start(usage: dict[str, Any] | None = None) -> SseEvent:
    start = message([], stop=None, usage=usage or {"input_tokens": 9, "output_tokens": 1})
    start["id"] = "msg_stream"
    return ev("message_start", message=start)


def stream_end(stop: str = "end_turn", usage: dict[str, Any] | None = None) -> list[SseEvent]:
    delta = {"stop_reason": stop, "stop_sequence": None}
    return [
        ev("message_delta", delta=delta, usage=usage or {"output_tokens": 2}),
        ev("message_stop"),
    ]


def text_block(index: int, *pieces: str) -> list[SseEvent]:
    """content_block_start, one text_delta per piece, content_block_stop."""
    return [
        ev("content_block_start", index=index, content_block=text("")),
        *[
            ev("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
            for p in pieces
        ],
        ev("content_block_stop", index=index),
    ]


def tool_block(index: int, call_id: str, name: str, *fragments: str) -> list[SseEvent]:
    """A streamed tool_use block: start with id and name, input_json_delta fragments, stop."""
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    deltas = [
        ev(
            "content_block_delta",
            index=index,
            delta={"type": "input_json_delta", "partial_json": f},
        )
        for f in fragments
    ]
    return [
        ev("content_block_start", index=index, content_block=block),
        *deltas,
        ev("content_block_stop", index=index),
    ]


def ask(prompt: str = "Hi", **fields: Any) -> ChatRequest:
    return ChatRequest(model=fields.pop("model", MODEL), messages=[Message.user(prompt)], **fields)


def accumulate(chunks: list[ChatChunk]) -> StreamAccumulator:
    acc = StreamAccumulator(provider="anthropic", model=MODEL)
    for c in chunks:
        acc.add(c)
    return acc


@pytest.fixture
async def provider(fake_llm_server: FakeLlmServer) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(
        ProviderConfig(api_key=SecretStr("sk-ant-test"), base_url=fake_llm_server.url),
        name="anthropic",
    )
    yield p
    await p.aclose()


# ------------------------------------------------------------------ replies
async def test_plain_reply(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("Hello "), text("there")])))
    request = ChatRequest(
        model=MODEL,
        messages=[Message.system("Be brief."), Message.system("Use English."), Message.user("Hi")],
        max_tokens=50,
        stop=["END"],
        temperature=0.2,
    )

    reply = await provider.chat_completion(request)

    assert reply.text == "Hello there"
    assert reply.id == "msg_01abc"
    assert reply.model == "claude-haiku-4-5-20251001"
    assert reply.provider == "anthropic"
    assert reply.finish_reason == "stop"
    assert reply.raw_finish_reason == "end_turn"
    assert reply.tool_calls == []
    assert reply.usage == Usage.of(12, 3, raw={"input_tokens": 12, "output_tokens": 3})
    sent = fake_llm_server.requests[-1]
    assert (sent.method, sent.path) == ("POST", MESSAGES)
    assert sent.headers["authorization"] == "Bearer sk-ant-test"
    assert sent.headers["anthropic-version"]
    # temperature is not sent: API version 2026-10-21 refuses it
    assert sent.json == {
        "model": MODEL,
        "max_tokens": 50,
        "system": "Be brief.\n\nUse English.",
        "messages": [{"role": "user", "content": [text("Hi")]}],
        "stop_sequences": ["END"],
        "stream": False,
    }


async def test_max_tokens_defaults_to_4096(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("ok")])))
    await provider.chat_completion(ask())
    sent = fake_llm_server.requests[-1].json
    assert sent["max_tokens"] == 4096
    assert "system" not in sent
    assert "tools" not in sent


async def test_thinking_blocks_are_left_out(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    thinking = {"type": "thinking", "thinking": "Let me see…", "signature": "sig"}
    fake_llm_server.reply(MESSAGES, Reply(json=message([thinking, text("42")])))
    reply = await provider.chat_completion(ask("6 × 7?"))
    assert reply.text == "42"


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ],
)
async def test_stop_reasons(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer, wire: str, expected: str
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("cut")], stop=wire)))
    reply = await provider.chat_completion(ask())
    assert reply.finish_reason == expected
    assert reply.raw_finish_reason == wire


async def test_usage_adds_cache_reads_and_writes_to_input(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    usage = {
        "input_tokens": 20,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 300,
        "output_tokens": 50,
        "output_tokens_details": {"thinking_tokens": 30},
    }
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("ok")], usage=usage)))

    reply = await provider.chat_completion(ask())

    assert reply.usage == Usage(
        input_tokens=1320,
        output_tokens=50,
        total_tokens=1370,
        cache_read_tokens=1000,
        cache_write_tokens=300,
        reasoning_tokens=30,
        raw=usage,
    )


# ------------------------------------------------------------------ streams
async def test_streamed_reply(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    events = [
        stream_start(),
        ("ping", {"type": "ping"}),
        *text_block(0, "Hel", "lo"),
        *stream_end(usage={"output_tokens": 2}),
    ]
    fake_llm_server.reply(MESSAGES, Reply(sse=events))

    chunks = await collect(provider, ask())

    assert [c.text for c in chunks] == ["Hel", "lo", ""]
    assert [c.finish_reason for c in chunks] == [None, None, "stop"]
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage == Usage.of(9, 2, raw={"input_tokens": 9, "output_tokens": 2})
    assert {(c.id, c.model) for c in chunks} == {("msg_stream", "claude-haiku-4-5-20251001")}
    reply = accumulate(chunks).response()
    assert (reply.text, reply.finish_reason, reply.id) == ("Hello", "stop", "msg_stream")
    sent = fake_llm_server.requests[-1].json
    assert sent["stream"] is True
    assert sent["messages"] == [{"role": "user", "content": [text("Hi")]}]


async def test_streamed_usage_with_cache(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    start = {
        "input_tokens": 5,
        "cache_read_input_tokens": 400,
        "cache_creation_input_tokens": 100,
        "output_tokens": 1,
    }
    final = {"output_tokens": 12, "cache_read_input_tokens": 400}
    events = [stream_start(start), *text_block(0, "ok"), *stream_end(usage=final)]
    fake_llm_server.reply(MESSAGES, Reply(sse=events))

    chunks = await collect(provider, ask())

    usage = chunks[-1].usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (505, 12, 517)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (400, 100)
    assert usage.raw == {**start, "output_tokens": 12}


async def test_streamed_thinking_is_reasoning(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    events = [
        stream_start(),
        ev("content_block_start", index=0, content_block=thinking),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Hmm"}),
        ev("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "s"}),
        ev("content_block_stop", index=0),
        *text_block(1, "42"),
        *stream_end(),
    ]
    fake_llm_server.reply(MESSAGES, Reply(sse=events))

    acc = accumulate(await collect(provider, ask()))

    assert (acc.reasoning, acc.text) == ("Hmm", "42")


# ------------------------------------------------------------------ tools
async def test_tool_call_round_trip(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    use = tool_use("toolu_1", {"city": "Paris", "unit": "celsius"})
    fake_llm_server.reply(
        MESSAGES,
        Reply(json=message([text("Let me check."), use], stop="tool_use")),
        Reply(json=message([text("It is 18 °C in Paris.")])),
    )
    system = Message.system("You are a weather bot.")
    question = Message.user("Weather in Paris?")

    first = await provider.chat_completion(
        ChatRequest(model=MODEL, messages=[system, question], tools=[WEATHER], tool_choice="auto")
    )

    assert first.finish_reason == "tool_calls"
    assert first.text == "Let me check."
    assert first.tool_calls == [
        ToolCall(
            id="toolu_1",
            name="get_weather",
            arguments={"city": "Paris", "unit": "celsius"},
            raw_arguments=None,
        )
    ]
    assert fake_llm_server.requests[-1].json["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather in a city",
            "input_schema": WEATHER.parameters,
        }
    ]
    assert fake_llm_server.requests[-1].json["tool_choice"] == {"type": "auto"}

    history = [
        system,
        question,
        first.message,
        Message.tool("toolu_1", "18 °C, sunny", name="get_weather"),
        Message.tool("toolu_2", "station offline", is_error=True),
        Message.user("And tomorrow?"),
    ]
    second = await provider.chat_completion(
        ChatRequest(model=MODEL, messages=history, tools=[WEATHER])
    )

    assert second.text == "It is 18 °C in Paris."
    assert fake_llm_server.requests[-1].json == {
        "model": MODEL,
        "max_tokens": 4096,
        "system": "You are a weather bot.",
        "messages": [
            {"role": "user", "content": [text("Weather in Paris?")]},
            {
                "role": "assistant",
                "content": [
                    text("Let me check."),
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris", "unit": "celsius"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "18 °C, sunny",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "station offline",
                        "is_error": True,
                    },
                    text("And tomorrow?"),
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather in a city",
                "input_schema": WEATHER.parameters,
            }
        ],
        "stream": False,
    }


async def test_turns_merge_results_lead_and_text_arguments_become_input(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("ok")])))
    calls = [
        ToolCall(id="toolu_a", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCall(id="toolu_b", name="get_weather", arguments="not json"),
    ]
    history = [
        Message.user("One"),
        Message.user("Two"),
        Message.assistant("Checking"),
        Message.assistant(tool_calls=calls),
        Message.user("Hurry"),  # tool results are moved before it
        Message.tool("toolu_a", "-3 °C"),
        Message.tool("toolu_b", "bad arguments", is_error=True),
    ]

    await provider.chat_completion(ChatRequest(model=MODEL, messages=history))

    assert fake_llm_server.requests[-1].json["messages"] == [
        {"role": "user", "content": [text("One"), text("Two")]},
        {
            "role": "assistant",
            "content": [
                text("Checking"),
                tool_use("toolu_a", {"city": "Oslo"}),
                tool_use("toolu_b", {}),
            ],
        },
        {
            "role": "user",
            "content": [
                tool_result("toolu_a", "-3 °C"),
                tool_result("toolu_b", "bad arguments", is_error=True),
                text("Hurry"),
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
    ],
)
async def test_tool_choice(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer, choice: str, wire: dict[str, Any]
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("ok")])))
    await provider.chat_completion(ask(tools=[WEATHER], tool_choice=choice))
    assert fake_llm_server.requests[-1].json["tool_choice"] == wire


async def test_streamed_tool_calls(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    events = [
        stream_start(),
        *text_block(0, "Checking both."),
        *tool_block(1, "toolu_p", "get_weather", "", '{"ci', 'ty": "Pa', 'ris"}'),
        *tool_block(2, "toolu_r", "get_weather", '{"city": ', '"Rome", "unit"', ': "celsius"}'),
        *stream_end("tool_use", usage={"output_tokens": 40}),
    ]
    fake_llm_server.reply(MESSAGES, Reply(sse=events))

    chunks = await collect(provider, ask("Paris and Rome?", tools=[WEATHER]))

    deltas = [d for c in chunks for d in c.tool_calls]
    assert deltas == [
        ToolCallDelta(index=0, id="toolu_p", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"ci'),
        ToolCallDelta(index=0, arguments='ty": "Pa'),
        ToolCallDelta(index=0, arguments='ris"}'),
        ToolCallDelta(index=1, id="toolu_r", name="get_weather"),
        ToolCallDelta(index=1, arguments='{"city": '),
        ToolCallDelta(index=1, arguments='"Rome", "unit"'),
        ToolCallDelta(index=1, arguments=': "celsius"}'),
    ]
    reply = accumulate(chunks).response()
    assert reply.text == "Checking both."
    assert reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_p", "get_weather", {"city": "Paris"}),
        ("toolu_r", "get_weather", {"city": "Rome", "unit": "celsius"}),
    ]
    assert reply.usage.output_tokens == 40


# ------------------------------------------------------------------ images
async def test_image_inputs(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=message([text("A cat and a dot.")])))
    images = [f"data:image/png;base64,{PNG}", "https://example.com/cat.jpg"]

    reply = await provider.chat_completion(
        ChatRequest(model=MODEL, messages=[Message.user("What is in these?", images=images)])
    )

    assert reply.text == "A cat and a dot."
    assert fake_llm_server.requests[-1].json["messages"] == [
        {
            "role": "user",
            "content": [
                text("What is in these?"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            ],
        }
    ]


async def test_unsupported_image_url_is_a_bad_request(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    request = ChatRequest(
        model=MODEL, messages=[Message.user("Look", images=["file:///etc/cat.png"])]
    )
    with pytest.raises(ProviderBadRequest, match="http") as caught:
        await provider.chat_completion(request)
    assert (caught.value.provider, caught.value.retryable) == ("anthropic", False)
    assert fake_llm_server.requests == []


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("status", "kind", "cls", "retryable"),
    [
        (400, "invalid_request_error", ProviderBadRequest, False),
        (401, "authentication_error", ProviderAuthError, False),
        (403, "permission_error", ProviderAuthError, False),
        (404, "not_found_error", ProviderBadRequest, False),
        (413, "request_too_large", ProviderBadRequest, False),
        (429, "rate_limit_error", RateLimited, True),
        (500, "api_error", ProviderServerError, True),
        (529, "overloaded_error", ProviderServerError, True),
    ],
)
async def test_http_errors(
    provider: AnthropicProvider,
    fake_llm_server: FakeLlmServer,
    status: int,
    kind: str,
    cls: type[LlmError],
    retryable: bool,
) -> None:
    fake_llm_server.reply(
        MESSAGES, Reply(status=status, json=error_body(kind, f"went wrong: {kind}"))
    )
    with pytest.raises(cls) as caught:
        await provider.chat_completion(ask())
    error = caught.value
    assert type(error) is cls
    assert error.retryable is retryable
    assert (error.status, error.provider, error.model) == (status, "anthropic", MODEL)
    assert f"went wrong: {kind}" in str(error)
    assert len(fake_llm_server.requests) == 1  # the SDK does not retry


async def test_http_error_before_a_stream(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(status=529, json=error_body("overloaded_error", "busy")))
    with pytest.raises(ProviderServerError, match="busy"):
        await collect(provider, ask())
    assert len(fake_llm_server.requests) == 1


async def test_timeout(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(MESSAGES, Reply(delay=2, json=message([text("late")])))
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        await provider.chat_completion(ask(timeout=0.3))
    assert time.monotonic() - started < 1.5
    assert (caught.value.retryable, caught.value.provider) == (True, "anthropic")


async def test_stream_timeout(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    events = [stream_start(), *text_block(0, "late"), *stream_end()]
    fake_llm_server.reply(MESSAGES, Reply(delay=2, sse=events))
    started = time.monotonic()
    with pytest.raises(ProviderTimeout):
        await collect(provider, ask(timeout=0.3))
    assert time.monotonic() - started < 1.5


async def test_malformed_body(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(MESSAGES, Reply(body=b'{"id": "msg_1", "content": [', status=200))
    with pytest.raises(MalformedResponse) as caught:
        await provider.chat_completion(ask())
    assert (caught.value.retryable, caught.value.model) == (True, MODEL)


@pytest.mark.parametrize(
    "body",
    [{"unexpected": True}, {**message([]), "content": None}, {**message([]), "id": None}],
)
async def test_body_without_a_message(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer, body: dict[str, Any]
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(json=body))
    with pytest.raises(MalformedResponse):
        await provider.chat_completion(ask())


async def test_stream_cut_midway(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    events = [stream_start(), *text_block(0, "Hel", "lo", " world"), *stream_end()]
    fake_llm_server.reply(MESSAGES, Reply(sse=events, cut_after=3))
    seen: list[str] = []
    with pytest.raises(StreamInterrupted, match="broke off") as caught:
        await collect_texts(provider, ask(), seen)
    assert seen == ["Hel"]
    assert (caught.value.retryable, caught.value.provider) == (True, "anthropic")


async def test_stream_ending_before_message_stop(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    events = [stream_start(), *text_block(0, "Hello"), stream_end()[0]]  # no message_stop
    fake_llm_server.reply(MESSAGES, Reply(sse=events))
    seen: list[str] = []
    with pytest.raises(StreamInterrupted, match="message_stop"):
        await collect_texts(provider, ask(), seen)
    assert seen == ["Hello"]


@pytest.mark.parametrize(
    ("kind", "cls", "status"),
    [
        ("overloaded_error", ProviderServerError, 529),
        ("api_error", ProviderServerError, 500),
        ("rate_limit_error", RateLimited, 429),
        ("invalid_request_error", ProviderBadRequest, 400),
        ("some_future_error", ProviderServerError, 500),
    ],
)
async def test_error_event_mid_stream(
    provider: AnthropicProvider,
    fake_llm_server: FakeLlmServer,
    kind: str,
    cls: type[LlmError],
    status: int,
) -> None:
    events = [
        stream_start(),
        *text_block(0, "Hel"),
        ("error", error_body(kind, "Overloaded")),
        *stream_end(),
    ]
    fake_llm_server.reply(MESSAGES, Reply(sse=events))
    seen: list[str] = []
    with pytest.raises(cls) as caught:
        await collect_texts(provider, ask(), seen)
    assert type(caught.value) is cls
    assert seen == ["Hel"]
    assert caught.value.status == status
    assert f"error event in the stream ({kind}): Overloaded" in str(caught.value)


async def test_stream_event_that_does_not_parse(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(MESSAGES, Reply(sse=[stream_start(), ("content_block_start", "{oops")]))
    with pytest.raises(MalformedResponse):
        await collect(provider, ask())


async def test_delta_for_an_unknown_tool_block(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    stray = {"type": "input_json_delta", "partial_json": '{"a": 1}'}
    events = [stream_start(), ev("content_block_delta", index=4, delta=stray), *stream_end()]
    fake_llm_server.reply(MESSAGES, Reply(sse=events))
    with pytest.raises(MalformedResponse, match="unexpected stream event"):
        await collect(provider, ask())


async def test_unreachable_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the call: nothing listens there
    provider = AnthropicProvider(
        ProviderConfig(api_key=SecretStr("sk-ant-test"), base_url=f"http://127.0.0.1:{port}")
    )
    try:
        with pytest.raises(ProviderUnreachable) as caught:
            await provider.chat_completion(ask())
        assert caught.value.retryable is True
        assert await provider.health_check() is False
    finally:
        await provider.aclose()


async def test_not_configured() -> None:
    provider = AnthropicProvider(ProviderConfig())
    assert provider.is_configured() is False
    with pytest.raises(ProviderNotConfigured, match=r"llm\.providers\.anthropic\.api_key"):
        await provider.chat_completion(ask())
    assert await provider.health_check() is False
    assert AnthropicProvider(ProviderConfig(api_key=SecretStr("k"))).is_configured() is True


# ------------------------------------------------------------------ models
def listed(model_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": "2026-01-01T00:00:00Z",
        **fields,
    }


async def test_available_models(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    first = {
        "data": [listed("claude-opus-4-6"), listed("claude-haiku-4-5-20251001")],
        "has_more": True,
        "first_id": "claude-opus-4-6",
        "last_id": "claude-haiku-4-5-20251001",
    }
    second = {
        "data": [listed("claude-sonnet-5", max_input_tokens=500_000), listed("claude-x")],
        "has_more": False,
        "first_id": "claude-sonnet-5",
        "last_id": "claude-x",
    }
    fake_llm_server.reply(MODELS, Reply(json=first), Reply(json=second))

    models = await provider.available_models()

    def info(model_id: str, window: int | None) -> ModelInfo:
        return ModelInfo(
            id=model_id,
            provider="anthropic",
            context_window=window,
            supports_vision=True,
            supports_functions=True,
        )

    assert models == [
        info("claude-opus-4-6", 1_000_000),
        info("claude-haiku-4-5-20251001", 200_000),
        info("claude-sonnet-5", 500_000),
        info("claude-x", None),
    ]
    sent = fake_llm_server.requests_to(MODELS)
    assert [r.method for r in sent] == ["GET", "GET"]
    assert sent[1].query["after_id"] == "claude-haiku-4-5-20251001"


async def test_available_models_error(
    provider: AnthropicProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(MODELS, Reply(status=401, json=error_body("authentication_error", "no")))
    with pytest.raises(ProviderAuthError):
        await provider.available_models()


async def test_health_check(provider: AnthropicProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(
        MODELS,
        Reply(json={"data": [listed("claude-opus-4-6")], "has_more": False}),
        Reply(status=500, json=error_body("api_error", "down")),
    )
    assert await provider.health_check() is True
    assert await provider.health_check() is False
    assert fake_llm_server.requests_to(MODELS)[0].query["limit"] == "1"
