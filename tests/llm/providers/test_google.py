"""GoogleProvider against a fake server speaking the Gemini API's REST wire (v1beta)."""

from __future__ import annotations

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
from opencrab.llm.providers.google import GoogleProvider
from opencrab.llm.providers.google_wire import SignatureMemory, wire_request
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import (
    ChatRequest,
    Message,
    ModelInfo,
    ToolCall,
    ToolDefinition,
)
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.ports import free_port
from tests.llm.providers.streams import collect, collect_texts

MODEL = "gemini-2.5-flash"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 13}


def gemini(
    parts: list[dict[str, Any]] | None,
    *,
    finish: str | None = "STOP",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A GenerateContentResponse as Gemini sends it (also one SSE event of a stream)."""
    cand: dict[str, Any] = {"index": 0}
    if parts is not None:
        cand["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        cand["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [cand],
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "resp-1",
    }
    if usage is not None:
        body["usageMetadata"] = usage
    return body


def call_part(name: str, args: dict[str, Any], signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def ask(*messages: Message, **fields: Any) -> ChatRequest:
    return ChatRequest(model=MODEL, messages=list(messages) or [Message.user("Hi")], **fields)


@pytest.fixture
async def provider(fake_llm_server: FakeLlmServer) -> AsyncIterator[GoogleProvider]:
    p = GoogleProvider(
        ProviderConfig(api_key=SecretStr("g-test"), base_url=fake_llm_server.url), name="google"
    )
    yield p
    await p.aclose()


# ------------------------------------------------------------------ replies
async def test_plain_reply(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    body = gemini([{"text": "Hello "}, {"text": "there"}], usage=USAGE)
    fake_llm_server.reply(GENERATE, Reply(json=body))
    request = ask(
        Message.system("Be brief."),
        Message.user("Hi"),
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )

    reply = await provider.chat_completion(request)

    assert reply.text == "Hello there"
    assert reply.id == "resp-1"
    assert reply.model == "gemini-2.5-flash-001"
    assert reply.provider == "google"
    assert reply.finish_reason == "stop"
    assert reply.raw_finish_reason == "STOP"
    assert reply.tool_calls == []
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.total_tokens) == (
        10,
        3,
        13,
    )
    sent = fake_llm_server.requests[-1]
    assert (sent.method, sent.path, sent.query) == ("POST", GENERATE, {})
    assert sent.headers["x-goog-api-key"] == "g-test"
    assert "authorization" not in sent.headers
    assert sent.json == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"]},
    }


async def test_thought_parts_stay_out_of_the_text(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    parts = [{"text": "Let me think", "thought": True}, {"text": "42"}]
    fake_llm_server.reply(GENERATE, Reply(json=gemini(parts)))

    reply = await provider.chat_completion(ask())

    assert reply.text == "42"


async def test_streamed_reply(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    usage = {**USAGE, "candidatesTokenCount": 2, "thoughtsTokenCount": 5, "totalTokenCount": 17}
    events: list[Any] = [
        gemini([{"text": "Pondering", "thought": True}], finish=None),
        gemini([{"text": "Hel"}], finish=None, usage={"promptTokenCount": 10}),
        gemini([{"text": "lo"}], usage=usage),
    ]
    fake_llm_server.reply(STREAM, Reply(sse=events))

    chunks = await collect(provider, ask())

    sent = fake_llm_server.requests[-1]
    assert (sent.path, sent.query) == (STREAM, {"alt": "sse"})
    assert sent.headers["x-goog-api-key"] == "g-test"
    assert sent.json == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    assert [(c.reasoning, c.text) for c in chunks[:-1]] == [
        ("Pondering", ""),
        ("", "Hel"),
        ("", "lo"),
    ]
    final = chunks[-1]
    assert final.finish_reason == "stop"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 7)
    assert final.usage.reasoning_tokens == 5
    assert final.usage.total_tokens == 17
    acc = StreamAccumulator(provider="google", model=MODEL)
    for c in chunks:
        acc.add(c)
    assert acc.response().text == "Hello"
    assert acc.reasoning == "Pondering"
    assert acc.response().id == "resp-1"


# ------------------------------------------------------------------ tools
async def test_tool_call_round_trip(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(
        GENERATE,
        Reply(json=gemini([call_part("get_weather", {"city": "Paris"}, "sig-1")], usage=USAGE)),
        Reply(json=gemini([{"text": "It is 18°C in Paris."}], usage=USAGE)),
    )
    question = Message.user("Weather in Paris?")

    first = await provider.chat_completion(ask(question, tools=[WEATHER], tool_choice="auto"))

    assert first.finish_reason == "tool_calls"
    assert first.raw_finish_reason == "STOP"
    [call] = first.tool_calls
    assert call.id.startswith("call_")
    assert (call.name, call.arguments, call.raw_arguments) == (
        "get_weather",
        {"city": "Paris"},
        None,
    )
    assert fake_llm_server.requests[-1].json["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather in a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ]
        }
    ]
    assert fake_llm_server.requests[-1].json["toolConfig"] == {
        "functionCallingConfig": {"mode": "AUTO"}
    }

    history = [question, first.message, Message.tool(call.id, "18°C, sunny")]
    second = await provider.chat_completion(ask(*history, tools=[WEATHER]))

    assert second.text == "It is 18°C in Paris."
    assert second.finish_reason == "stop"
    assert fake_llm_server.requests[-1].json["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "sig-1",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18°C, sunny"}}}
            ],
        },
    ]


async def test_history_from_elsewhere(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    """Calls Gemini never made get the stand-in signature; parallel results share a turn."""
    fake_llm_server.reply(GENERATE, Reply(json=gemini([{"text": "Done."}])))
    calls = [
        ToolCall(id="toolu_1", name="read", arguments={"path": "a.txt"}),
        ToolCall(id="toolu_2", name="read", arguments='{"path": "b.txt"}', raw_arguments="x"),
    ]
    history = [
        Message.user("Read both"),
        Message.assistant("Reading.", calls),
        Message.tool("toolu_1", "alpha"),
        Message.tool("toolu_2", "no such file", name="read", is_error=True),
        Message.user("Summarise"),
    ]

    await provider.chat_completion(ask(*history))

    assert fake_llm_server.requests[-1].json["contents"] == [
        {"role": "user", "parts": [{"text": "Read both"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Reading."},
                {
                    "functionCall": {"name": "read", "args": {"path": "a.txt"}},
                    "thoughtSignature": "skip_thought_signature_validator",
                },
                {"functionCall": {"name": "read", "args": {"path": "b.txt"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "alpha"}}},
                {"functionResponse": {"name": "read", "response": {"error": "no such file"}}},
                {"text": "Summarise"},
            ],
        },
    ]


async def test_tool_result_without_a_name_is_refused(provider: GoogleProvider) -> None:
    history = [Message.user("Hi"), Message.tool("unknown_call", "result")]

    with pytest.raises(ProviderBadRequest, match=r"set Message\.name"):
        await provider.chat_completion(ask(*history))


async def test_streamed_tool_calls(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    events: list[Any] = [
        gemini([{"text": "Checking both."}], finish=None),
        gemini([call_part("get_weather", {"city": "Paris"}, "sig-a")], finish=None),
        gemini([call_part("get_weather", {"city": "Tokyo"})], usage=USAGE),
    ]
    fake_llm_server.reply(STREAM, Reply(sse=events))

    chunks = await collect(provider, ask(tools=[WEATHER]))

    deltas = [d for c in chunks for d in c.tool_calls]
    assert [(d.index, d.name, d.arguments) for d in deltas] == [
        (0, "get_weather", '{"city": "Paris"}'),
        (1, "get_weather", '{"city": "Tokyo"}'),
    ]
    acc = StreamAccumulator(provider="google", model=MODEL)
    for c in chunks:
        acc.add(c)
    reply = acc.response()
    assert reply.text == "Checking both."
    assert reply.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Tokyo"}),
    ]
    assert [c.id for c in reply.tool_calls] == [d.id for d in deltas]
    assert reply.usage.input_tokens == 10
    # the first call's signature is remembered for the follow-up request
    fake_llm_server.reply(GENERATE, Reply(json=gemini([{"text": "ok"}])))
    await provider.chat_completion(ask(Message.user("Hi"), reply.message))
    model_turn = fake_llm_server.requests[-1].json["contents"][1]
    assert [p.get("thoughtSignature") for p in model_turn["parts"]] == [None, "sig-a", None]


def test_tool_schema_is_reduced_to_what_gemini_accepts() -> None:
    tool = ToolDefinition(
        name="search",
        parameters={
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "query": {"type": "string", "format": "uri", "default": "x"},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "mode": {"const": "fast"},
                "tags": {"type": "array", "items": {"type": "string", "examples": ["a"]}},
                "when": {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}]},
            },
            "required": ["query"],
        },
    )
    request = ask(tools=[tool, ToolDefinition(name="ping")], tool_choice="search")

    body = wire_request(request, SignatureMemory())

    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "search",
                    "description": "",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "query": {"type": "string"},
                            "limit": {"type": "integer", "nullable": True, "minimum": 1},
                            "mode": {"enum": ["fast"]},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "when": {
                                "anyOf": [
                                    {"type": "string", "format": "date-time"},
                                    {"type": "number"},
                                ]
                            },
                        },
                        "required": ["query"],
                    },
                },
                {"name": "ping", "description": ""},
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["search"]}
    }


@pytest.mark.parametrize(
    ("choice", "config"),
    [("auto", {"mode": "AUTO"}), ("none", {"mode": "NONE"}), ("required", {"mode": "ANY"})],
)
async def test_tool_choice(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer, choice: str, config: Any
) -> None:
    fake_llm_server.reply(GENERATE, Reply(json=gemini([{"text": "ok"}])))

    await provider.chat_completion(ask(tools=[WEATHER], tool_choice=choice))

    assert fake_llm_server.requests[-1].json["toolConfig"] == {"functionCallingConfig": config}


# ------------------------------------------------------------------ images and usage
async def test_image_inputs(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(GENERATE, Reply(json=gemini([{"text": "A crab."}])))
    images = ["data:image/png;base64,iVBORw0KGgo=", "https://example.com/crab.png?size=2"]

    reply = await provider.chat_completion(ask(Message.user("What is this?", images=images)))

    assert reply.text == "A crab."
    assert fake_llm_server.requests[-1].json["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is this?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "image/png", "fileUri": images[1]}},
            ],
        }
    ]


async def test_usage_with_cache_and_thoughts(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    meta = {
        "promptTokenCount": 1200,
        "cachedContentTokenCount": 1000,
        "candidatesTokenCount": 40,
        "thoughtsTokenCount": 160,
        "totalTokenCount": 1400,
    }
    fake_llm_server.reply(GENERATE, Reply(json=gemini([{"text": "ok"}], usage=meta)))

    usage = (await provider.chat_completion(ask())).usage

    assert usage.input_tokens == 1200
    assert usage.cache_read_tokens == 1000
    assert usage.cache_write_tokens == 0
    assert usage.output_tokens == 200
    assert usage.reasoning_tokens == 160
    assert usage.total_tokens == 1400
    assert usage.raw == meta


@pytest.mark.parametrize(
    ("raw", "finish"),
    [
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "error"),
    ],
)
async def test_finish_reasons(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer, raw: str, finish: str
) -> None:
    fake_llm_server.reply(GENERATE, Reply(json=gemini(None, finish=raw)))

    reply = await provider.chat_completion(ask())

    assert (reply.finish_reason, reply.raw_finish_reason, reply.text) == (finish, raw, "")


async def test_blocked_prompt(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": USAGE}
    fake_llm_server.reply(GENERATE, Reply(json=body))
    fake_llm_server.reply(STREAM, Reply(sse=[body]))

    with pytest.raises(ProviderBadRequest, match="prompt was blocked: SAFETY") as caught:
        await provider.chat_completion(ask())
    assert caught.value.retryable is False
    with pytest.raises(ProviderBadRequest, match="prompt was blocked: SAFETY"):
        await collect(provider, ask())


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("status", "google_status", "cls", "retryable"),
    [
        (401, "UNAUTHENTICATED", ProviderAuthError, False),
        (429, "RESOURCE_EXHAUSTED", RateLimited, True),
        (500, "INTERNAL", ProviderServerError, True),
    ],
)
async def test_http_errors(
    provider: GoogleProvider,
    fake_llm_server: FakeLlmServer,
    status: int,
    google_status: str,
    cls: type[LlmError],
    retryable: bool,
) -> None:
    error = {"error": {"code": status, "message": "went wrong", "status": google_status}}
    fake_llm_server.reply(GENERATE, Reply(status=status, json=error))
    fake_llm_server.reply(STREAM, Reply(status=status, json=error))

    with pytest.raises(cls) as caught:
        await provider.chat_completion(ask())
    assert type(caught.value) is cls
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    assert str(caught.value) == f"google: HTTP {status}: went wrong ({google_status})"
    with pytest.raises(cls):
        await collect(provider, ask())


async def test_bad_key_is_an_auth_error(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    error = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
        }
    }
    fake_llm_server.reply(GENERATE, Reply(status=400, json=error))

    with pytest.raises(ProviderAuthError, match=r"llm\.providers\.google\.api_key"):
        await provider.chat_completion(ask())


async def test_other_400_is_a_bad_request(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    error = {"error": {"code": 400, "message": "bad schema", "status": "INVALID_ARGUMENT"}}
    fake_llm_server.reply(GENERATE, Reply(status=400, json=error))

    with pytest.raises(ProviderBadRequest, match="bad schema"):
        await provider.chat_completion(ask())


async def test_timeout(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply(GENERATE, Reply(delay=2, json=gemini([{"text": "late"}])))
    fake_llm_server.reply(STREAM, Reply(delay=2, sse=[gemini([{"text": "late"}])]))

    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        await provider.chat_completion(ask(timeout=0.3))
    with pytest.raises(ProviderTimeout):
        await collect(provider, ask(timeout=0.3))

    assert caught.value.retryable is True
    assert time.monotonic() - started < 1.8


async def test_malformed_body(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    broken = Reply(body=b'{"candidates": [', content_type="application/json")
    fake_llm_server.reply(GENERATE, broken)
    fake_llm_server.reply(STREAM, Reply(sse=[gemini([{"text": "a"}], finish=None), "{oops"]))

    with pytest.raises(MalformedResponse) as caught:
        await provider.chat_completion(ask())
    assert caught.value.retryable is True
    with pytest.raises(MalformedResponse, match="oops"):
        await collect(provider, ask())


async def test_reply_without_candidates_is_malformed(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(GENERATE, Reply(json={"usageMetadata": USAGE}))

    with pytest.raises(MalformedResponse, match="no candidates"):
        await provider.chat_completion(ask())


async def test_stream_cut_mid_way(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    events: list[Any] = [
        gemini([{"text": "One"}], finish=None),
        gemini([{"text": " two"}], finish=None),
        gemini([{"text": " three"}], usage=USAGE),
    ]
    fake_llm_server.reply(STREAM, Reply(sse=events, cut_after=2))
    seen: list[str] = []

    with pytest.raises(StreamInterrupted, match="broke off") as caught:
        await collect_texts(provider, ask(), seen)

    assert seen == ["One", " two"]
    assert caught.value.retryable is True


async def test_stream_ending_without_finish_reason(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(STREAM, Reply(sse=[gemini([{"text": "One"}], finish=None)]))

    with pytest.raises(StreamInterrupted, match="without a finish reason"):
        await collect(provider, ask())


async def test_error_event_in_stream(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    fake_llm_server.reply(STREAM, Reply(sse=[gemini([{"text": "a"}], finish=None), error]))

    with pytest.raises(ProviderServerError, match="overloaded"):
        await collect(provider, ask())


async def test_unreachable_server() -> None:
    config = ProviderConfig(api_key=SecretStr("g-test"), base_url=f"http://127.0.0.1:{free_port()}")
    provider = GoogleProvider(config)
    try:
        with pytest.raises(ProviderUnreachable) as caught:
            await provider.chat_completion(ask())
        assert caught.value.retryable is True
        with pytest.raises(ProviderUnreachable):
            await collect(provider, ask())
        assert await provider.health_check() is False
    finally:
        await provider.aclose()


async def test_without_a_key() -> None:
    provider = GoogleProvider(ProviderConfig())

    assert provider.is_configured() is False
    with pytest.raises(ProviderNotConfigured, match=r"llm\.providers\.google\.api_key"):
        await provider.chat_completion(ask())
    assert await provider.health_check() is False


# ------------------------------------------------------------------ models and health
async def test_available_models_follows_pages(
    provider: GoogleProvider, fake_llm_server: FakeLlmServer
) -> None:
    page1 = {
        "models": [
            {
                "name": "models/gemini-2.5-flash",
                "inputTokenLimit": 1_048_576,
                "supportedGenerationMethods": ["generateContent", "countTokens"],
            }
        ],
        "nextPageToken": "p2",
    }
    page2 = {
        "models": [
            {
                "name": "models/text-embedding-004",
                "inputTokenLimit": 2048,
                "supportedGenerationMethods": ["embedContent"],
            }
        ]
    }
    fake_llm_server.reply("/v1beta/models", Reply(json=page1), Reply(json=page2))

    models = await provider.available_models()

    assert models == [
        ModelInfo(
            id="gemini-2.5-flash",
            provider="google",
            context_window=1_048_576,
            supports_vision=True,
            supports_functions=True,
        ),
        ModelInfo(
            id="text-embedding-004",
            provider="google",
            context_window=2048,
            supports_vision=False,
            supports_functions=False,
        ),
    ]
    queries = [r.query for r in fake_llm_server.requests_to("/v1beta/models")]
    assert queries == [{"pageSize": "1000"}, {"pageSize": "1000", "pageToken": "p2"}]
    assert fake_llm_server.requests[-1].headers["x-goog-api-key"] == "g-test"


async def test_health_check(provider: GoogleProvider, fake_llm_server: FakeLlmServer) -> None:
    fake_llm_server.reply("/v1beta/models", Reply(json={"models": []}))
    assert await provider.health_check() is True

    fake_llm_server.reset()
    fake_llm_server.reply("/v1beta/models", Reply(status=403, json={"error": {"message": "no"}}))
    assert await provider.health_check() is False
    fake_llm_server.reply("/v1beta/models", Reply(delay=2, json={"models": []}))
    impatient = GoogleProvider(
        ProviderConfig(api_key=SecretStr("g-test"), base_url=fake_llm_server.url, timeout_secs=0.2)
    )
    try:
        assert await impatient.health_check() is False
    finally:
        await impatient.aclose()
