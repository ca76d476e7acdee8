"""Ollama through its native API (`/api/chat`, `/api/tags`), with plain httpx.

Decisions:

- The server is `base_url` (default http://localhost:11434); no key. The provider counts
  as configured whenever it is enabled: whether a server answers is `health_check`'s job
  (GET /api/version with a short timeout), which the router probes.
- Messages map one to one. Images go in `images` as raw base64, so data URLs lose their
  `data:…;base64,` header; Ollama cannot fetch links, so an http(s) image is a
  ProviderBadRequest saying to pass a data URL. Tool results are role "tool" messages
  with `tool_name` (the message's `name`, else the name of the call it answers); Ollama
  has no error flag, so a failed tool's output is prefixed with "ERROR: ".
- Assistant tool calls are sent with `arguments` as an object, as Ollama returns them.
  Ollama's calls usually have no id, so ToolCalls get generated `call_…` ids.
- Options: temperature, `num_predict` (max_tokens) and `stop`. Ollama has no
  tool_choice: "none" leaves the tools out, anything else is left to the model.
- Replies: done_reason "length" → "length", any other → "stop" ("tool_calls" when the
  message has calls); `thinking` is streamed as reasoning and left out of text.
  Usage: input = prompt_eval_count, output = eval_count; `raw` keeps the counters
  and durations Ollama reports.
- Streams are NDJSON; each line is a partial message, the last has `done: true` and the
  counters. Tool calls arrive whole, each one ToolCallDelta. An `{"error": …}` line is
  ProviderServerError; a stream that ends without `done: true` is StreamInterrupted.
- HTTP errors keep Ollama's `{"error": "…"}` text; a 404 for a missing model is a
  ProviderBadRequest naming the model and the `ollama pull` that fixes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, ClassVar

import httpx

from opencrab.config.providers import Price, ProviderFacts
from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderBadRequest,
    ProviderServerError,
    StreamInterrupted,
)
from opencrab.llm.base import parse_arguments
from opencrab.llm.providers.httpx_provider import HttpxProvider
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    Choice,
    FinishReason,
    ImagePart,
    Message,
    ModelInfo,
    ToolCall,
    ToolCallDelta,
    Usage,
)

COUNTERS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)
"""Fields of Ollama's last message kept as `Usage.raw`."""

VISION_FAMILIES = {"clip", "mllama"}


# ------------------------------------------------------------------ requests
def wire_request(request: ChatRequest, *, stream: bool) -> dict[str, Any]:
    """The /api/chat body; ValueError for what Ollama cannot take."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": wire_messages(request.messages),
        "stream": stream,
    }
    if request.tools and request.tool_choice != "none":
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    options = request.sampling("num_predict")
    if options:
        body["options"] = options
    return body


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Ollama chat messages."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        wire: dict[str, Any] = {"role": message.role, "content": message.text}
        images = [image_data(p) for p in message.parts if isinstance(p, ImagePart)]
        if images and message.role != "tool":  # a tool result's images: its text only
            wire["images"] = images
        if message.tool_calls:
            names.update((call.id, call.name) for call in message.tool_calls)
            wire["tool_calls"] = [
                {"function": {"name": c.name, "arguments": _args(c)}} for c in message.tool_calls
            ]
        if message.role == "tool":
            name = message.name or names.get(message.tool_call_id or "")
            if name:
                wire["tool_name"] = name
            if message.is_error:
                wire["content"] = f"ERROR: {message.text}"
        out.append(wire)
    return out


def image_data(part: ImagePart) -> str:
    """The raw base64 of a data-URL image; ValueError for a link."""
    if not part.is_data_url:
        raise ValueError(
            f"Ollama takes only inline images, not links ({part.url[:80]}); "
            "pass the image as a data:<mime>;base64,… URL"
        )
    return part.data()[1]


def _args(call: ToolCall) -> Any:
    if isinstance(call.arguments, str):
        arguments, _ = parse_arguments(call.arguments)
        return arguments
    return call.arguments


# ------------------------------------------------------------------ replies
def tool_call_from(raw: Any) -> ToolCall | None:
    """A ToolCall from one entry of `message.tool_calls` (arguments arrive as an object)."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        return None
    arguments, raw_arguments = parse_arguments(function.get("arguments"))
    return ToolCall(
        id=str(raw.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
        name=str(function.get("name", "")),
        arguments=arguments,
        raw_arguments=raw_arguments,
    )


def tool_calls_of(message: dict[str, Any]) -> list[ToolCall]:
    raw = message.get("tool_calls")
    calls = [tool_call_from(c) for c in raw] if isinstance(raw, list) else []
    return [c for c in calls if c is not None]


def usage_from(body: dict[str, Any]) -> Usage:
    """Usage from the counters of a final message."""
    return Usage.of(
        int(body.get("prompt_eval_count") or 0),
        int(body.get("eval_count") or 0),
        raw={k: body[k] for k in COUNTERS if k in body},
    )


def finish_from(done_reason: Any, has_calls: bool) -> FinishReason:
    if done_reason == "length":
        return "length"
    return "tool_calls" if has_calls else "stop"


class OllamaProvider(HttpxProvider):
    """Models served by a local (or remote) Ollama.

    Example:
        provider = OllamaProvider(ProviderConfig(base_url="http://gpu-box:11434"))
        reply = await provider.chat_completion(
            ChatRequest(model="llama3.2", messages=[Message.user("Hi")])
        )
    """

    name = "ollama"
    facts = ProviderFacts(local=True, prices=(Price("*", 0.0, 0.0),))  # your own machine
    default_base_url: ClassVar[str] = "http://localhost:11434"

    def is_configured(self) -> bool:
        """Always True: Ollama needs only a URL; the router probes `health_check`."""
        return True

    def error_for_status(self, status: int, message: str, model: str) -> LlmError:
        """A 404 for a missing model names the model and how to get it."""
        if status == 404 and "not found" in message.lower():
            return ProviderBadRequest(
                f"HTTP 404: model {model!r} is not on {self.base_url()} ({message}); "
                f"run `ollama pull {model}` there",
                provider=self.name,
                model=model,
                status=status,
            )
        return super().error_for_status(status, message, model)

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        try:
            return wire_request(request, stream=stream)
        except ValueError as exc:
            raise ProviderBadRequest(str(exc), provider=self.name, model=request.model) from exc

    def _message(self, body: dict[str, Any], model: str) -> dict[str, Any]:
        if isinstance(body.get("error"), str):
            raise ProviderServerError(body["error"], provider=self.name, model=model)
        message = body.get("message")
        if not isinstance(message, dict):
            raise MalformedResponse("the reply has no message", provider=self.name, model=model)
        return message

    # ---------------------------------------------------------------- calls
    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        """One complete reply."""
        body = await self.send_json(
            "POST",
            "/api/chat",
            self._body(request, stream=False),
            model=request.model,
            timeout=self.timeout_for(request),
        )
        message = self._message(body, request.model)
        calls = tool_calls_of(message)
        reply = Message(
            role="assistant", content=str(message.get("content") or "") or None, tool_calls=calls
        )
        done_reason = body.get("done_reason")
        return ChatResponse(
            id=f"ollama-{uuid.uuid4().hex}",
            model=str(body.get("model") or request.model),
            provider=self.name,
            choices=[Choice(message=reply, finish_reason=finish_from(done_reason, bool(calls)))],
            usage=usage_from(body),
            raw_finish_reason=done_reason if isinstance(done_reason, str) else None,
        )

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as Ollama streams it (NDJSON); the `done` line brings finish and usage."""
        stream_id = f"ollama-{uuid.uuid4().hex}"
        calls = 0
        done = False
        payloads = self.stream_payloads(
            "/api/chat",
            self._body(request, stream=True),
            model=request.model,
            timeout=self.timeout_for(request),
            reader=_ndjson_lines,
        )
        async with aclosing(payloads):
            async for payload in payloads:
                event = self.decode(payload, request.model)
                message = self._message(event, request.model)
                chunk = ChatChunk(
                    id=stream_id,
                    model=event["model"] if isinstance(event.get("model"), str) else None,
                    text=str(message.get("content") or ""),
                    reasoning=str(message.get("thinking") or ""),
                )
                for call in tool_calls_of(message):
                    chunk.tool_calls.append(
                        ToolCallDelta(
                            index=calls,
                            id=call.id,
                            name=call.name,
                            arguments=json.dumps(call.arguments, ensure_ascii=False),
                        )
                    )
                    calls += 1
                if event.get("done") is True:
                    done = True
                    chunk.finish_reason = finish_from(event.get("done_reason"), calls > 0)
                    chunk.usage = usage_from(event)
                if chunk.text or chunk.reasoning or chunk.tool_calls or done:
                    yield chunk
                if done:
                    break
        if not done:
            raise StreamInterrupted(
                "the stream ended before its done line", provider=self.name, model=request.model
            )

    async def available_models(self) -> list[ModelInfo]:
        """The models pulled on the server (/api/tags)."""
        body = await self.get_json("/api/tags")
        entries = body.get("models")
        return [model_info(e, self.name) for e in entries or [] if isinstance(e, dict)]

    async def health_check(self) -> bool:
        """True when /api/version answers within a few seconds; never raises."""
        try:
            await self.send_json(
                "GET",
                "/api/version",
                None,
                model="",
                timeout=min(self.health_timeout_secs, self.config.timeout_secs),
            )
        except Exception:
            return False
        return True


def model_info(raw: dict[str, Any], provider: str) -> ModelInfo:
    """A ModelInfo from an /api/tags entry."""
    details = raw.get("details")
    families = details.get("families") if isinstance(details, dict) else None
    window = raw.get("context_length")
    return ModelInfo(
        id=str(raw.get("name") or raw.get("model") or ""),
        provider=provider,
        context_window=window if isinstance(window, int) else None,
        supports_vision=bool(VISION_FAMILIES.intersection(families or [])),
    )


async def _ndjson_lines(response: httpx.Response) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if line.strip():
            yield line
