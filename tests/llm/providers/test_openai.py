"""OpenAIProvider through the real `openai` SDK against a fake server speaking OpenAI's wire."""

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
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import (
    ChatRequest,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, chunk, completion, tool_delta
from tests.llm.providers.streams import collect, collect_texts

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
)


def ask(text: str = "Hi", **fields: Any) -> ChatRequest:
    return ChatRequest(
        model=fields.pop("model", "gpt-5-mini"), messages=[Message.user(text)], **fields
    )


@pytest.fixture
async def provider(fake_llm_server: FakeLlmServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(
        ProviderConfig(api_key=SecretStr("sk-test"), base_url=fake_llm_server.url + "/v1"),
        name="openai",
    )
    yield p
    await p.aclose()


# ------------------------------------------------------------------ replies
async def test_plain_reply(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "Hello there"})))
    request = ChatRequest(
        model="gpt-5-mini",
        messages=[Message.system("Be brief."), Message.user("Hi")],
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )

    reply = await provider.chat_completion(request)

    assert reply.text == "Hello there"
    assert reply.id == "chatcmpl-abc"
    assert reply.model == "gpt-5-mini-2025-08-07"
    assert reply.provider == "openai"
    assert reply.finish_reason == "stop"
    assert reply.raw_finish_reason == "stop"
    assert reply.tool_calls == []
    assert reply.cost_usd is None
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.total_tokens) == (
        12,
        3,
        15,
    )
    sent = fake_llm_server.requests[-1]
    assert sent.method == "POST"
    assert sent.path == CHAT
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json == {
        "model": "gpt-5-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "temperature": 0.2,
        "max_completion_tokens": 50,
        "stop": ["END"],
        "stream": False,
    }


async def test_organization_header(fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "ok"})))
    config = ProviderConfig(
        api_key=SecretStr("sk-test"), base_url=fake_llm_server.url + "/v1", organization="org-7"
    )
    provider = OpenAIProvider(config)
    try:
        await provider.chat_completion(ask())
    finally:
        await provider.aclose()
    assert fake_llm_server.requests[-1].headers["openai-organization"] == "org-7"


async def test_streamed_reply(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    events: list[Any] = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, finish="stop"),
        chunk(usage=usage),
        "[DONE]",
    ]
    fake_llm_server.reply(CHAT, Reply(sse=events))

    chunks = await collect(provider, ask())

    assert [c.text for c in chunks] == ["Hel", "lo", "", ""]
    assert [c.finish_reason for c in chunks] == [None, None, "stop", None]
    assert chunks[-1].usage == Usage.of(9, 2, raw=usage)
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.id for c in chunks} == {"chatcmpl-str"}
    acc = StreamAccumulator(provider="openai", model="gpt-5-mini")
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert (reply.text, reply.finish_reason, reply.usage.total_tokens) == ("Hello", "stop", 11)
    sent = fake_llm_server.requests[-1].json
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_calls"),
        ("tool_calls", "tool_calls"),
        ("end_turn", "stop"),
    ],
)
async def test_finish_reasons(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer, wire: str, expected: str
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "cut"}, finish=wire)))
    reply = await provider.chat_completion(ask())
    assert reply.finish_reason == expected
    assert reply.raw_finish_reason == wire


# ------------------------------------------------------------------ tools
async def test_tool_call_round_trip(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    arguments = '{"city": "Paris", "unit": "celsius"}'
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }
    fake_llm_server.reply(
        CHAT,
        Reply(json=completion({"content": None, "tool_calls": [call]}, finish="tool_calls")),
        Reply(json=completion({"content": "It is 18 °C in Paris."})),
    )
    question = Message.user("Weather in Paris?")

    first = await provider.chat_completion(
        ChatRequest(model="gpt-5-mini", messages=[question], tools=[WEATHER], tool_choice="auto")
    )

    assert first.finish_reason == "tool_calls"
    assert first.text == ""
    assert first.tool_calls == [
        ToolCall(
            id="call_1",
            name="get_weather",
            arguments={"city": "Paris", "unit": "celsius"},
            raw_arguments=arguments,
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

    history = [
        question,
        first.message,
        Message.tool("call_1", '{"temp_c": 18}', name="get_weather"),
    ]
    final = await provider.chat_completion(
        ChatRequest(model="gpt-5-mini", messages=history, tools=[WEATHER])
    )

    assert final.text == "It is 18 °C in Paris."
    assert final.finish_reason == "stop"
    assert fake_llm_server.requests[-1].json["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris", "unit": "celsius"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18}'},
    ]
    assert "tool_choice" not in fake_llm_server.requests[-1].json


async def test_unparseable_arguments_are_kept_as_text(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    call = {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": None, "tool_calls": [call]}, finish="tool_calls"))
    )
    reply = await provider.chat_completion(ask(tools=[WEATHER]))
    assert reply.tool_calls == [
        ToolCall(id="c9", name="f", arguments="{oops", raw_arguments="{oops")
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer, choice: str, wire: Any
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "ok"})))
    await provider.chat_completion(ask(tools=[WEATHER], tool_choice=choice))
    assert fake_llm_server.requests[-1].json["tool_choice"] == wire


async def test_streamed_parallel_tool_calls(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    events: list[Any] = [
        chunk({"role": "assistant", "content": None}),
        chunk(tool_delta(0, "", call_id="call_a", name="get_weather")),
        chunk(tool_delta(0, '{"ci')),
        chunk(tool_delta(0, 'ty": "Pa')),
        chunk(tool_delta(1, "", call_id="call_b", name="get_weather")),
        chunk(tool_delta(0, 'ris"}')),
        chunk(tool_delta(1, '{"city": ')),
        chunk(tool_delta(1, '"Rome"}')),
        chunk({}, finish="tool_calls"),
        chunk(usage={"prompt_tokens": 40, "completion_tokens": 30, "total_tokens": 70}),
        "[DONE]",
    ]
    fake_llm_server.reply(CHAT, Reply(sse=events))

    chunks = await collect(provider, ask("Paris and Rome?", tools=[WEATHER]))

    deltas = [d for c in chunks for d in c.tool_calls]
    assert deltas == [
        ToolCallDelta(index=0, id="call_a", name="get_weather", arguments=""),
        ToolCallDelta(index=0, arguments='{"ci'),
        ToolCallDelta(index=0, arguments='ty": "Pa'),
        ToolCallDelta(index=1, id="call_b", name="get_weather", arguments=""),
        ToolCallDelta(index=0, arguments='ris"}'),
        ToolCallDelta(index=1, arguments='{"city": '),
        ToolCallDelta(index=1, arguments='"Rome"}'),
    ]
    acc = StreamAccumulator(provider="openai", model="gpt-5-mini")
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_weather", {"city": "Rome"}),
    ]
    assert reply.usage.output_tokens == 30


# ------------------------------------------------------------------ images and usage
async def test_image_inputs(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "A cat and a dot."})))
    data_url = "data:image/png;base64,iVBORw0KGgo="
    message = Message(
        role="user",
        content=[
            TextPart(text="What is in these?"),
            ImagePart(url="https://example.com/cat.jpg", detail="high"),
            ImagePart(url=data_url),
        ],
    )

    reply = await provider.chat_completion(ChatRequest(model="gpt-4o", messages=[message]))

    assert reply.text == "A cat and a dot."
    assert fake_llm_server.requests[-1].json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/cat.jpg", "detail": "high"},
                },
                {"type": "image_url", "image_url": {"url": data_url}},
            ],
        }
    ]


async def test_usage_with_cached_and_reasoning_tokens(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 256,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "42"}, usage=usage)))

    reply = await provider.chat_completion(ask())

    assert reply.usage == Usage(
        input_tokens=2006,
        output_tokens=300,
        total_tokens=2306,
        cache_read_tokens=1920,
        cache_write_tokens=0,
        reasoning_tokens=256,
        raw=usage,
    )


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [
        (401, ProviderAuthError, False),
        (403, ProviderAuthError, False),
        (400, ProviderBadRequest, False),
        (404, ProviderBadRequest, False),
        (429, RateLimited, True),
        (500, ProviderServerError, True),
        (503, ProviderServerError, True),
    ],
)
async def test_http_errors(
    provider: OpenAIProvider,
    fake_llm_server: FakeLlmServer,
    status: int,
    error: type[LlmError],
    retryable: bool,
) -> None:
    body = {"error": {"message": f"scripted {status}", "type": "x", "param": None, "code": None}}
    fake_llm_server.reply(CHAT, Reply(status=status, json=body))

    with pytest.raises(error) as caught:
        await provider.chat_completion(ask())

    assert type(caught.value) is error
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    assert (caught.value.provider, caught.value.model) == ("openai", "gpt-5-mini")
    assert f"scripted {status}" in str(caught.value)
    assert len(fake_llm_server.requests) == 1  # the SDK does not retry


async def test_http_error_with_a_body_that_is_not_json(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    """A gateway's error page has no JSON: its text is the message, not just the status."""
    page = Reply(status=503, body=b"upstream connect error", content_type="text/plain")
    fake_llm_server.reply(CHAT, page)
    with pytest.raises(ProviderServerError) as caught:
        await provider.chat_completion(ask())
    assert str(caught.value) == "openai: HTTP 503: upstream connect error"
    assert (caught.value.status, caught.value.retryable) == (503, True)


async def test_http_error_when_streaming(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(status=429, json={"error": {"message": "slow down"}}))
    with pytest.raises(RateLimited, match="slow down"):
        await collect(provider, ask())


async def test_timeout(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(delay=2, json=completion({"content": "late"})))
    start = time.monotonic()

    with pytest.raises(ProviderTimeout) as caught:
        await provider.chat_completion(ask(timeout=0.3))

    assert time.monotonic() - start < 1.5
    assert caught.value.retryable is True
    assert caught.value.provider == "openai"


async def test_stream_timeout(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(CHAT, Reply(delay=2, sse=[chunk({"content": "late"})]))
    with pytest.raises(ProviderTimeout):
        await collect(provider, ask(timeout=0.3))


async def test_unreachable_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    provider = OpenAIProvider(
        ProviderConfig(api_key=SecretStr("sk-test"), base_url=f"http://127.0.0.1:{port}/v1")
    )
    try:
        with pytest.raises(ProviderUnreachable) as caught:
            await provider.chat_completion(ask())
    finally:
        await provider.aclose()
    assert caught.value.retryable is True


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b"{}",
        b'{"id": "x", "choices": "nope"}',
        b'{"choices": []}',
        b'{"choices": [{"index": 0, "finish_reason": "stop"}]}',
        b"<html>sign in</html>",
    ],
)
async def test_malformed_body(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer, body: bytes
) -> None:
    fake_llm_server.reply(CHAT, Reply(body=body, content_type="application/json"))
    with pytest.raises(MalformedResponse) as caught:
        await provider.chat_completion(ask())
    assert caught.value.retryable is True
    assert caught.value.provider == "openai"


async def test_malformed_stream_event(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(sse=[chunk({"content": "ok"}), "{broken", "[DONE]"]))
    seen: list[str] = []
    with pytest.raises(MalformedResponse):
        await collect_texts(provider, ask(), seen)
    assert seen == ["ok"]


async def test_stream_cut_midway(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    events: list[Any] = [
        chunk({"content": "Once"}),
        chunk({"content": " upon"}),
        chunk({"content": " a time"}),
        chunk({}, finish="stop"),
        "[DONE]",
    ]
    fake_llm_server.reply(CHAT, Reply(sse=events, cut_after=2))
    seen: list[str] = []

    with pytest.raises(StreamInterrupted) as caught:
        await collect_texts(provider, ask(), seen)

    assert seen == ["Once", " upon"]
    assert caught.value.retryable is True
    assert (caught.value.provider, caught.value.model) == ("openai", "gpt-5-mini")


async def test_stream_ending_without_finish_reason(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(sse=[chunk({"content": "Once"})]))
    with pytest.raises(StreamInterrupted, match="without a finish reason"):
        await collect(provider, ask())


async def test_error_event_inside_stream(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    events: list[Any] = [chunk({"content": "Hi"}), {"error": {"message": "overloaded"}}]
    fake_llm_server.reply(CHAT, Reply(sse=events))
    with pytest.raises(ProviderServerError, match="overloaded"):
        await collect(provider, ask())


async def test_missing_key_is_not_configured(fake_llm_server: FakeLlmServer) -> None:
    provider = OpenAIProvider(ProviderConfig(base_url=fake_llm_server.url + "/v1"))
    assert provider.is_configured() is False
    azure_without_endpoint = OpenAIProvider(
        ProviderConfig(api_key=SecretStr("k"), api_version="2024-10-21")
    )
    assert azure_without_endpoint.is_configured() is False
    with pytest.raises(ProviderNotConfigured, match=r"llm\.providers\.openai\.base_url"):
        await azure_without_endpoint.chat_completion(ask())
    with pytest.raises(ProviderNotConfigured, match=r"llm\.providers\.openai\.api_key"):
        await provider.chat_completion(ask())
    assert await provider.health_check() is False
    assert fake_llm_server.requests == []


# ------------------------------------------------------------------ Azure
async def test_azure_deployment_and_api_version(fake_llm_server: FakeLlmServer) -> None:
    path = "/openai/deployments/my-gpt4o/chat/completions"
    fake_llm_server.reply(path, Reply(json=completion({"content": "from Azure"}, model="gpt-4o")))
    config = ProviderConfig(
        api_key=SecretStr("azure-key"), base_url=fake_llm_server.url, api_version="2024-10-21"
    )
    provider = OpenAIProvider(config)
    try:
        assert provider.is_azure is True
        reply = await provider.chat_completion(ask(model="my-gpt4o", max_tokens=20))
    finally:
        await provider.aclose()

    assert reply.text == "from Azure"
    sent = fake_llm_server.requests[-1]
    assert sent.path == path
    assert sent.query == {"api-version": "2024-10-21"}
    assert sent.headers["api-key"] == "azure-key"
    assert "authorization" not in sent.headers
    assert sent.json["model"] == "my-gpt4o"
    assert sent.json["max_completion_tokens"] == 20


async def test_azure_v1_endpoint_uses_the_plain_client(fake_llm_server: FakeLlmServer) -> None:
    path = "/openai/v1/chat/completions"
    fake_llm_server.reply(path, Reply(json=completion({"content": "v1"})))
    config = ProviderConfig(
        api_key=SecretStr("azure-key"),
        base_url=fake_llm_server.url + "/openai/v1",
        api_version="preview",
    )
    provider = OpenAIProvider(config)
    try:
        assert provider.is_azure is False
        reply = await provider.chat_completion(ask(model="gpt-4o"))
    finally:
        await provider.aclose()
    assert reply.text == "v1"
    sent = fake_llm_server.requests[-1]
    assert sent.path == path
    assert sent.query == {}
    assert sent.headers["authorization"] == "Bearer azure-key"


# ------------------------------------------------------------------ models and health
async def test_available_models(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    listed = [
        {"id": "gpt-4o-2024-08-06", "object": "model", "created": 1, "owned_by": "system"},
        {"id": "gpt-5.2-pro", "object": "model", "created": 1, "owned_by": "system"},
        {"id": "o1", "object": "model", "created": 1, "owned_by": "system"},
        {"id": "text-embedding-3-small", "object": "model", "created": 1, "owned_by": "system"},
    ]
    fake_llm_server.reply("/v1/models", Reply(json={"object": "list", "data": listed}))

    models = await provider.available_models()

    assert [(m.id, m.context_window, m.supports_vision, m.supports_functions) for m in models] == [
        ("gpt-4o-2024-08-06", 128_000, True, True),
        ("gpt-5.2-pro", 256_000, True, True),
        ("o1", 200_000, True, False),
        ("text-embedding-3-small", None, False, True),
    ]
    assert {m.provider for m in models} == {"openai"}
    assert fake_llm_server.requests[-1].method == "GET"


async def test_available_models_error(
    provider: OpenAIProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply("/v1/models", Reply(status=401, json={"error": {"message": "no"}}))
    with pytest.raises(ProviderAuthError):
        await provider.available_models()


async def test_health_check(provider: OpenAIProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(
        "/v1/models",
        Reply(json={"object": "list", "data": []}),
        Reply(status=500, json={"error": {"message": "down"}}),
        Reply(delay=2, json={"object": "list", "data": []}),
    )
    provider.health_timeout_secs = 0.3
    assert await provider.health_check() is True
    assert await provider.health_check() is False
    start = time.monotonic()
    assert await provider.health_check() is False
    assert time.monotonic() - start < 1.5
