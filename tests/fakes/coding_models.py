"""Scripted model turns for the real coding CLIs, served by `FakeLlmServer` on 127.0.0.1.

Two wire formats, each streamed as the real API streams it:

- the Anthropic Messages API (`POST /v1/messages`, SSE) for Claude Code: `message_start`,
  per block `content_block_start` / `content_block_delta` (`text_delta` or
  `input_json_delta`) / `content_block_stop`, then `message_delta` (stop_reason, usage)
  and `message_stop`;
- the OpenAI Responses API (`POST /v1/responses`, SSE, Codex's `wire_api = "responses"`):
  `response.created`, `response.in_progress`, per item `response.output_item.added`,
  (`response.output_text.delta` / `response.function_call_arguments.delta`),
  `response.output_item.done`, then `response.completed` with the usage;
- the Gemini API (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`) for Gemini
  CLI: one `GenerateContentResponse` chunk (`candidates[0].content.parts`: a `text` or a
  `functionCall`, `finishReason`, `usageMetadata`); `:generateContent` (its side
  requests, e.g. the model router's JSON choice) gets the same shape unstreamed;
- OpenAI Chat Completions (`POST /v1/chat/completions`, SSE) for OpenCode's
  OpenAI-compatible provider: `chat.completion.chunk`s (the text, or one `tool_calls`
  entry), the `finish_reason`, a usage-only chunk, then `[DONE]`.

A `ScriptedModel` answers the CLI's agent-loop requests (those that offer tools) with the
turn matching how many model turns the conversation already holds; side requests (titles,
summaries) get a short text. Past the script's end a request gets its closing text.

    model = ScriptedModel([ToolCall("Write", {...}), Text("Done.")]).serve_anthropic(server)
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.llm_server import FakeLlmServer, Recorded, Reply, SseEvent

INPUT_TOKENS = 1200
OUTPUT_TOKENS = 35


@dataclass(frozen=True)
class Text:
    """The model's final answer for this turn."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model calls one tool (Claude Code: Write, Edit, Bash; Codex: exec_command).

    `namespace` is the Responses API's tool namespace the tool is offered in (Codex
    offers an MCP server's tools in `mcp__<server>`), sent with the call when set."""

    name: str
    arguments: dict[str, Any]
    namespace: str | None = None


Turn = Text | ToolCall


@dataclass
class ScriptedModel:
    """The model's turns, one per agent-loop request; `requests` are those it answered."""

    turns: list[Turn]
    side_text: str = "ok"
    requests: list[Recorded] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_turn(self, request: Recorded) -> Turn:
        """The turn for this request, chosen by how many model turns its conversation
        already holds (so a side request never uses up a turn); text for side requests."""
        body = request.json or {}
        if not body.get("tools"):
            return Text(self.side_text)
        with self._lock:
            self.requests.append(request)
        index = _turns_taken(body)
        if index < len(self.turns):
            return self.turns[index]
        last = self.turns[-1]
        return last if isinstance(last, Text) else Text("Done.")

    def number(self) -> int:
        """A fresh number for a message / response id (ids never repeat)."""
        with self._lock:
            return next(self._numbers)

    def serve_anthropic(self, server: FakeLlmServer) -> ScriptedModel:
        """Answer `POST /v1/messages` on `server` in the Messages API's SSE format."""
        server.respond("/v1/messages", lambda request: _anthropic_reply(self, request))
        return self

    def serve_gemini(self, server: FakeLlmServer) -> ScriptedModel:
        """Answer `POST /v1beta/models/{model}:…` on `server` as the Gemini API does."""
        server.respond("/v1beta/models/*", lambda request: _gemini_reply(self, request))
        return self

    def serve_chat(self, server: FakeLlmServer) -> ScriptedModel:
        """Answer `POST /v1/chat/completions` on `server` in Chat Completions SSE."""
        server.respond("/v1/chat/completions", lambda request: _chat_reply(self, request))
        return self

    def serve_responses(self, server: FakeLlmServer) -> ScriptedModel:
        """Answer `POST /v1/responses` on `server` in the Responses API's SSE format."""
        server.respond("/v1/responses", lambda request: _responses_reply(self, request))
        return self


def _turns_taken(body: dict[str, Any]) -> int:
    """Model turns already in the request: assistant messages (Messages API, Chat
    Completions), `model` contents (Gemini API) or output items the model produced
    (Responses API `input`)."""
    if "contents" in body:
        return sum(1 for c in body["contents"] if c.get("role") == "model")
    if "messages" in body:
        return sum(1 for m in body["messages"] if m.get("role") == "assistant")
    taken = 0
    for item in body.get("input") or []:
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call", "local_shell_call") or (
            kind == "message" and item.get("role") == "assistant"
        ):
            taken += 1
    return taken


def _anthropic_reply(model: ScriptedModel, request: Recorded) -> Reply:
    body = request.json or {}
    if body.get("stream") is not True:
        return Reply(status=400, json={"type": "error", "error": {"message": "stream only"}})
    turn = model.next_turn(request)
    return Reply(sse=anthropic_events(turn, str(body.get("model", "claude")), model.number()))


def anthropic_events(turn: Turn, model: str, number: int) -> list[SseEvent]:
    """One assistant message streamed as the Messages API streams it."""
    usage = {
        "input_tokens": INPUT_TOKENS,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    message = {
        "id": f"msg_fake_{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[SseEvent] = [("message_start", {"type": "message_start", "message": message})]
    if isinstance(turn, Text):
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": turn.text}
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_fake_{number:04d}", "name": turn.name}
        block["input"] = {}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(turn.arguments)}
        stop = "tool_use"
    start = {"type": "content_block_start", "index": 0, "content_block": block}
    events += [
        ("content_block_start", start),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": OUTPUT_TOKENS},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _responses_reply(model: ScriptedModel, request: Recorded) -> Reply:
    body = request.json or {}
    if body.get("stream") is not True:
        return Reply(status=400, json={"error": {"message": "stream only"}})
    turn = model.next_turn(request)
    return Reply(sse=responses_events(turn, str(body.get("model", "gpt")), model.number()))


def responses_events(turn: Turn, model: str, number: int) -> list[SseEvent]:
    """One response streamed as the Responses API streams it (one output item)."""
    response_id = f"resp_fake_{number:04d}"
    item_id = f"item_fake_{number:04d}"
    response = {"id": response_id, "object": "response", "model": model, "status": "in_progress"}
    if isinstance(turn, Text):
        done: dict[str, Any] = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        }
        added = {**done, "status": "in_progress", "content": []}
        middle: list[SseEvent] = [
            _event(
                "response.output_text.delta",
                item_id=item_id,
                output_index=0,
                content_index=0,
                delta=turn.text,
            ),
            _event(
                "response.output_text.done",
                item_id=item_id,
                output_index=0,
                content_index=0,
                text=turn.text,
            ),
        ]
    else:
        arguments = json.dumps(turn.arguments)
        done = {
            "type": "function_call",
            "id": item_id,
            "call_id": f"call_fake_{number:04d}",
            "name": turn.name,
            "arguments": arguments,
            "status": "completed",
        }
        if turn.namespace:
            done["namespace"] = turn.namespace
        added = {**done, "status": "in_progress", "arguments": ""}
        middle = [
            _event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=0,
                delta=arguments,
            ),
            _event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=0,
                arguments=arguments,
            ),
        ]
    usage = {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }
    completed = {**response, "status": "completed", "output": [done], "usage": usage}
    return [
        _event("response.created", response=response),
        _event("response.in_progress", response=response),
        _event("response.output_item.added", output_index=0, item=added),
        *middle,
        _event("response.output_item.done", output_index=0, item=done),
        _event("response.completed", response=completed),
    ]


def _event(name: str, **data: Any) -> SseEvent:
    return (name, {"type": name, **data})


def _gemini_reply(model: ScriptedModel, request: Recorded) -> Reply:
    name, _, method = request.path.removeprefix("/v1beta/models/").partition(":")
    if method == "countTokens":
        return Reply(json={"totalTokens": INPUT_TOKENS})
    if method not in ("streamGenerateContent", "generateContent"):
        return Reply(status=404, json={"error": {"code": 404, "message": f"no {method}"}})
    body = request.json or {}
    config = body.get("generationConfig") or {}
    if not body.get("tools") and config.get("responseMimeType") == "application/json":
        turn: Turn = Text(_json_side_text(config))  # the model router, the next-speaker check
    else:
        turn = model.next_turn(request)
    chunk = gemini_response(turn, name, model.number())
    if method == "generateContent":
        return Reply(json=chunk)
    if request.query.get("alt") != "sse":
        return Reply(status=400, json={"error": {"code": 400, "message": "alt=sse only"}})
    return Reply(sse=[chunk])


def _json_side_text(config: dict[str, Any]) -> str:
    """A JSON answer with a string for each required property of the asked schema."""
    schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    required = schema.get("required") or list(schema.get("properties") or {})
    values = {"next_speaker": "user", "model_choice": "flash"}
    return json.dumps({key: values.get(key, "ok") for key in required})


def gemini_response(turn: Turn, model: str, number: int) -> dict[str, Any]:
    """One GenerateContentResponse: the turn's text or function call, finished."""
    if isinstance(turn, Text):
        part: dict[str, Any] = {"text": turn.text}
    else:
        part = {"functionCall": {"name": turn.name, "args": turn.arguments}}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": INPUT_TOKENS,
            "candidatesTokenCount": OUTPUT_TOKENS,
            "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS,
        },
        "modelVersion": model,
        "responseId": f"resp_fake_{number:04d}",
    }


def _chat_reply(model: ScriptedModel, request: Recorded) -> Reply:
    body = request.json or {}
    if body.get("stream") is not True:
        return Reply(status=400, json={"error": {"message": "stream only"}})
    turn = model.next_turn(request)
    return Reply(sse=[*chat_chunks(turn, str(body.get("model", "gpt")), model.number()), "[DONE]"])


def chat_chunks(turn: Turn, model: str, number: int) -> list[SseEvent]:
    """One assistant message streamed as Chat Completions stream it, with usage last."""

    def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> SseEvent:
        return {
            "id": f"chatcmpl-fake-{number:04d}",
            "object": "chat.completion.chunk",
            "created": 1_760_000_000,
            "model": model,
            "choices": choices,
            "usage": usage,
        }

    if isinstance(turn, Text):
        delta: dict[str, Any] = {"role": "assistant", "content": turn.text}
        finish = "stop"
    else:
        function = {"name": turn.name, "arguments": json.dumps(turn.arguments)}
        call = {"index": 0, "id": f"call_fake_{number:04d}", "type": "function"}
        delta = {"role": "assistant", "tool_calls": [call | {"function": function}]}
        finish = "tool_calls"
    usage = {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }
    return [
        chunk([{"index": 0, "delta": delta, "finish_reason": None}]),
        chunk([{"index": 0, "delta": {}, "finish_reason": finish}]),
        chunk([], usage),
    ]
