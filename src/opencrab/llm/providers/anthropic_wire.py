"""Neutral types ⇄ Anthropic's Messages API wire format.

The mapping decisions are listed in `opencrab.llm.providers.anthropic`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
from anthropic.types import Message as WireMessage
from anthropic.types import TextBlock, ToolUseBlock

from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderBadRequest,
    ProviderTimeout,
    ProviderUnreachable,
    StreamInterrupted,
    llm_error_for_status,
)
from opencrab.llm.base import parse_arguments
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    Choice,
    FinishReason,
    ImagePart,
    Message,
    ModelInfo,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

try:
    import httpx2 as http_lib  # what anthropic >= 2 is built on
except ImportError:  # pragma: no cover - older SDKs use httpx
    import httpx as http_lib  # type: ignore[no-redef]

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires `max_tokens`; this is sent when the request sets none."""

SDK_ERRORS = (
    anthropic.AnthropicError,
    http_lib.HTTPError,
    http_lib.StreamError,
    ValueError,
    TimeoutError,
)
"""What a call through the SDK may raise besides our own errors (see `error_from`)."""

CONTEXT_WINDOWS = {
    "claude-opus-4-6": 1_000_000,
    "claude-sonnet-4-5": 1_000_000,
    "claude-haiku-4-5": 200_000,
}
"""Context windows of known models, used when the models list does not report one."""

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
# Anthropic's error `type`s with the HTTP status each goes with (for SSE `error` events).
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_SNAPSHOT = re.compile(r"-\d{8}$")


class UnsupportedInput(ValueError):
    """A neutral request the Messages API cannot express (e.g. an image that is no URL)."""


# ------------------------------------------------------------------ requests
def wire_params(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for `messages.create` (everything but `stream` and `timeout`)."""
    system, messages = wire_messages(request.messages)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": DEFAULT_MAX_TOKENS if request.max_tokens is None else request.max_tokens,
        "messages": messages,
    }
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [wire_tool(tool) for tool in request.tools]
        if request.tool_choice is not None:
            params["tool_choice"] = wire_tool_choice(request.tool_choice)
    if request.stop:
        params["stop_sequences"] = request.stop
    return params


def wire_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, alternating user/assistant turns) of neutral messages."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                system.append(message.text)
            continue
        if message.role == "tool":
            role, blocks = "user", [tool_result(message)]
        else:
            role, blocks = message.role, content_blocks(message)
        if not blocks:
            continue  # the API refuses empty turns and empty text blocks
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # tool results must open a user turn; the sort is stable
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(system), turns


def content_blocks(message: Message) -> list[dict[str, Any]]:
    """Text and image blocks of a user or assistant message, then its tool_use blocks."""
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif message.role == "user":  # assistant turns cannot hold images
            blocks.append(image_block(part))
    for call in message.tool_calls if message.role == "assistant" else []:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call)}
        )
    return blocks


def image_block(part: ImagePart) -> dict[str, Any]:
    """An image block: base64 source for a data URL, url source for http(s)."""
    if part.is_data_url:
        try:
            media_type, data = part.data()
        except ValueError as exc:
            raise UnsupportedInput(str(exc)) from exc
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    if part.url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    raise UnsupportedInput(
        f"an image must be an http(s) or base64 data: URL, not {part.url[:40]!r}"
    )


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as the JSON object tool_use wants ({} when they are not one)."""
    arguments = call.arguments
    if isinstance(arguments, str):
        arguments = parse_arguments(arguments)[0]
    return arguments if isinstance(arguments, dict) else {}


def tool_result(message: Message) -> dict[str, Any]:
    """A role "tool" message as a tool_result block."""
    if not message.tool_call_id:
        raise UnsupportedInput("a tool message needs the tool_call_id it answers")
    content: str | list[dict[str, Any]] = message.text
    if any(isinstance(part, ImagePart) for part in message.parts):
        content = content_blocks(message.model_copy(update={"role": "user"}))
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
        "is_error": message.is_error,
    }


def wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    """A tool definition: name, description, input_schema."""
    wire: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description:
        wire["description"] = tool.description
    return wire


def wire_tool_choice(choice: str) -> dict[str, Any]:
    """auto → auto, none → none, required → any; another string forces that tool."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


# ------------------------------------------------------------------ replies
def finish_reason(raw: str | None) -> FinishReason | None:
    """The neutral finish reason of a `stop_reason` (unknown values → stop)."""
    return _FINISH.get(raw, "stop") if raw else None


def usage_from(raw: dict[str, Any]) -> Usage:
    """Neutral usage of an Anthropic usage object (cache reads and writes added to input)."""
    read = int(raw.get("cache_read_input_tokens") or 0)
    write = int(raw.get("cache_creation_input_tokens") or 0)
    details = raw.get("output_tokens_details")
    reasoning = details.get("thinking_tokens") if isinstance(details, dict) else None
    return Usage.of(
        int(raw.get("input_tokens") or 0) + read + write,
        int(raw.get("output_tokens") or 0),
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=int(reasoning or 0),
        raw=raw,
    )


def response_from(message: object, *, provider: str, model: str) -> ChatResponse:
    """A ChatResponse of a Message; MalformedResponse when it is not one."""
    try:
        if not isinstance(message, WireMessage) or not isinstance(message.content, list):
            raise TypeError("the body is not a message")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:  # the SDK builds unknown block types as TextBlocks
            kind = getattr(block, "type", None)
            if kind == "text" and isinstance(block, TextBlock):
                texts.append(block.text)
            elif kind == "tool_use" and isinstance(block, ToolUseBlock):
                arguments = block.input if isinstance(block.input, dict) else {}
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
            # thinking, redacted_thinking and server-tool blocks have no neutral place
        usage = message.usage
        reply = Message(role="assistant", content="".join(texts) or None, tool_calls=calls)
        return ChatResponse(
            id=message.id,
            model=message.model or model,
            provider=provider,
            choices=[Choice(message=reply, finish_reason=finish_reason(message.stop_reason))],
            usage=usage_from(usage.to_dict(mode="json")) if usage is not None else Usage(),
            raw_finish_reason=message.stop_reason,
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"unexpected reply: {exc}", provider=provider, model=model) from exc


class StreamState:
    """Turns Messages stream events into ChatChunks; `finished` once message_stop came."""

    def __init__(self, *, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.id: str | None = None
        self.finished = False
        self._stop_reason: str | None = None
        self._usage: dict[str, Any] = {}
        self._calls: dict[int, int] = {}  # content block index → tool-call index

    def chunk(self, event: object) -> ChatChunk | None:
        """The chunk for one event, or None when it carries nothing to pass on."""
        try:
            return self._chunk(event)
        except (AttributeError, LookupError, TypeError, ValueError) as exc:
            raise MalformedResponse(
                f"unexpected stream event: {exc}", provider=self.provider, model=self.model
            ) from exc

    def _chunk(self, event: Any) -> ChatChunk | None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.id = event.message.id
            self.model = event.message.model or self.model
            self._add_usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            kind = getattr(block, "type", None)
            if kind == "text" and block.text:
                return self._out(text=block.text)
            if kind == "tool_use":
                index = self._calls[event.index] = len(self._calls)
                start = json.dumps(block.input) if block.input else ""
                delta = ToolCallDelta(index=index, id=block.id, name=block.name, arguments=start)
                return self._out(tool_calls=[delta])
        elif kind == "content_block_delta":
            delta = event.delta
            kind = getattr(delta, "type", None)
            if kind == "text_delta" and delta.text:
                return self._out(text=delta.text)
            if kind == "thinking_delta" and delta.thinking:
                return self._out(reasoning=delta.thinking)
            if kind == "input_json_delta" and delta.partial_json:
                index = self._calls[event.index]
                return self._out(
                    tool_calls=[ToolCallDelta(index=index, arguments=delta.partial_json)]
                )
        elif kind == "message_delta":
            self._stop_reason = event.delta.stop_reason or self._stop_reason
            self._add_usage(event.usage)
        elif kind == "message_stop":
            self.finished = True
            finish = finish_reason(self._stop_reason) or "stop"
            return self._out(finish_reason=finish, usage=usage_from(dict(self._usage)))
        return None

    def _add_usage(self, usage: Any) -> None:
        if usage is not None:  # message_delta counts are cumulative: later values win
            fields = usage.to_dict(mode="json").items()
            self._usage.update({k: v for k, v in fields if v is not None})

    def _out(self, **fields: Any) -> ChatChunk:
        return ChatChunk(id=self.id, model=self.model, **fields)


def model_info(raw: Any, *, provider: str) -> ModelInfo:
    """A ModelInfo of one models-list entry; the listed input limit wins over the table."""
    model_id = str(raw.id)
    window = getattr(raw, "max_input_tokens", None)
    if not isinstance(window, int):
        window = CONTEXT_WINDOWS.get(_SNAPSHOT.sub("", model_id.replace(".", "-")))
    return ModelInfo(
        id=model_id,
        provider=provider,
        context_window=window,
        supports_vision=True,
        supports_functions=True,
    )


# ------------------------------------------------------------------ errors
def error_from(
    exc: BaseException, *, provider: str, model: str | None, streaming: bool
) -> LlmError:
    """The LlmError for what the SDK raised; `streaming` once a stream has begun."""
    if isinstance(exc, LlmError):
        return exc

    def err(cls: type[LlmError], message: str) -> LlmError:
        return cls(message, provider=provider, model=model)

    if isinstance(exc, UnsupportedInput):
        return err(ProviderBadRequest, str(exc))
    if isinstance(exc, anthropic.APITimeoutError | TimeoutError | http_lib.TimeoutException):
        return err(ProviderTimeout, "no answer in time")
    if isinstance(exc, anthropic.APIConnectionError | http_lib.TransportError):
        cause = exc.__cause__ or exc
        if isinstance(cause, LlmError):  # raised by a client hook (opencrab.instance)
            return cause
        if streaming:
            return err(StreamInterrupted, f"the stream broke off: {cause}")
        return err(ProviderUnreachable, f"cannot connect: {cause}")
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = _error_of(exc)
        if exc.status_code >= 400:
            return llm_error_for_status(exc.status_code, message, provider=provider, model=model)
        # an `error` event inside a 200 stream: its error type says what happened
        status = _ERROR_STATUS.get(kind, 500)
        cls = type(llm_error_for_status(status, message))
        return cls(
            f"error event in the stream ({kind or 'unknown'}): {message}",
            provider=provider,
            model=model,
            status=status,
        )
    if isinstance(
        exc,
        anthropic.APIResponseValidationError
        | http_lib.DecodingError
        | ValueError
        | AttributeError
        | TypeError,
    ):
        return err(MalformedResponse, f"the reply does not parse: {exc}")
    return err(LlmError, f"{type(exc).__name__}: {exc}")


def _error_of(exc: anthropic.APIStatusError) -> tuple[str, str]:
    """(error type, message) of Anthropic's `{"type": "error", "error": {...}}` body."""
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    if not isinstance(error, dict):
        return "", exc.message
    message = error.get("message")
    return str(error.get("type") or ""), message if isinstance(message, str) else exc.message
