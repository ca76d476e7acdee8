"""Neutral types ⇄ the OpenAI Chat Completions wire format (shared by OpenAI-compatible providers).

Mapping decisions:

- Messages: system/user/assistant/tool keep their roles. Content with images becomes a
  parts list (`text` and `image_url` parts; `detail` only when set); system and
  assistant content is sent as plain text (images there are not part of the API).
  Assistant tool calls go out as `{"type": "function", "function": {"name", "arguments"}}`
  with the arguments as a JSON string; tool results as `{"role": "tool", "tool_call_id"}`.
  The wire has no error flag for a tool result, so `is_error` is not sent.
- `tool_choice`: "auto"/"none"/"required" as is; any other string names the function the
  model must call. It is only sent together with `tools` (the API refuses it alone).
- Usage: OpenAI's `prompt_tokens` already include the cached tokens
  (`prompt_tokens_details.cached_tokens`) and `completion_tokens` already include the
  reasoning tokens (`completion_tokens_details.reasoning_tokens`), which is exactly the
  neutral convention, so `input_tokens = prompt_tokens` and `output_tokens =
  completion_tokens`. `prompt_tokens_details.cache_write_tokens` (sent by OpenRouter for
  vendors that bill cache writes) fills `cache_write_tokens`. `raw` is the usage object
  as the server sent it.
- Finish reasons: stop, length, tool_calls and content_filter map to themselves; the
  legacy `function_call` maps to tool_calls; `error` (OpenRouter) to error; any other
  value a compatible server invents maps to stop. The raw value is kept in
  `ChatResponse.raw_finish_reason`.
- Errors: HTTP statuses go through `llm_error_for_status` (401/403 auth, 429 rate limit,
  5xx server, other 4xx bad request), with the message of the `{"error": {"message"}}`
  body, else the body's text; SDK timeouts → ProviderTimeout; connection errors →
  ProviderUnreachable before a stream has started and StreamInterrupted once it has;
  bodies or stream events that do not parse or lack required fields → MalformedResponse.
  A 200 body that is an `{"error": {"code", "message"}}` object and has no choices
  (OpenRouter's report of a failure once the model had started) maps by its `code` like
  a status (a code that is no HTTP status → ProviderServerError); so does an `error`
  event inside a stream.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pydantic
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderBadRequest,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnreachable,
    StreamInterrupted,
    llm_error_for_status,
)
from opencrab.llm.base import arguments_json, parse_arguments
from opencrab.llm.types import (
    ChatChunk,
    ChatResponse,
    Choice,
    FinishReason,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

SDK_ERRORS = (openai.OpenAIError, ValueError, TimeoutError)
"""What a call through the SDK may raise besides our own LlmErrors (see `error_from`)."""

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


# ------------------------------------------------------------------ requests
def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Chat Completions `messages`."""
    return [_wire_message(m) for m in messages]


def _wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text}
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "user" and isinstance(message.content, list):
        wire["content"] = [_wire_part(p) for p in message.content]
    elif message.role == "assistant" and message.tool_calls:
        wire["content"] = message.text or None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_json(call.arguments)},
            }
            for call in message.tool_calls
        ]
    else:
        wire["content"] = message.text
    if message.name:
        wire["name"] = message.name
    return wire


def _wire_part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    image: dict[str, Any] = {"url": part.url}
    if part.detail is not None:
        image["detail"] = part.detail
    return {"type": "image_url", "image_url": image}


def wire_tools(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as `{"type": "function", "function": {...}}` entries."""
    wire = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
        if tool.description:
            function["description"] = tool.description
        wire.append({"type": "function", "function": function})
    return wire


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    """The wire tool_choice: auto, none or required as is; a tool name forces that function."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


# ------------------------------------------------------------------ replies
def finish_reason(raw: str | None) -> FinishReason | None:
    """The neutral finish reason of a wire `finish_reason` (see the module docstring)."""
    if not raw:
        return None
    return _FINISH.get(raw, "stop")


def usage_from(usage: CompletionUsage) -> Usage:
    """Neutral usage of a Chat Completions usage object."""
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    input_tokens = int(usage.prompt_tokens or 0)
    output_tokens = int(usage.completion_tokens or 0)
    return Usage.of(
        input_tokens,
        output_tokens,
        total_tokens=int(usage.total_tokens or input_tokens + output_tokens),
        cache_read_tokens=int((prompt.cached_tokens if prompt else None) or 0),
        cache_write_tokens=int((prompt.cache_write_tokens if prompt else None) or 0),
        reasoning_tokens=int((completion.reasoning_tokens if completion else None) or 0),
        raw=usage.to_dict(mode="json"),
    )


def response_from(completion: object, *, provider: str, model: str) -> ChatResponse:
    """A ChatResponse from a ChatCompletion; MalformedResponse when fields are missing."""
    error = getattr(completion, "error", None)  # not in the schema: kept as an extra field
    if isinstance(error, dict) and error and not getattr(completion, "choices", None):
        raise error_in_body(error, provider=provider, model=model)
    try:
        if not isinstance(completion, ChatCompletion) or not isinstance(completion.choices, list):
            raise TypeError("the body is not a chat completion")
        if not completion.choices:
            raise ValueError("the reply has no choices")
        choices = [_choice(c) for c in completion.choices]
        usage = usage_from(completion.usage) if completion.usage is not None else Usage()
        return ChatResponse(
            id=completion.id or "",
            model=completion.model or model,
            provider=provider,
            choices=choices,
            usage=usage,
            raw_finish_reason=completion.choices[0].finish_reason,
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"unexpected reply: {exc}", provider=provider, model=model) from exc


def _choice(choice: Any) -> Choice:
    message = choice.message
    if message is None:
        raise ValueError("a choice has no message")
    calls = []
    for n, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        if function is None:
            continue  # custom (free-form) tool calls are not part of the neutral types
        arguments, raw = parse_arguments(function.arguments)
        calls.append(
            ToolCall(
                id=call.id or f"call_{n}",  # as StreamAccumulator names an id-less call
                name=function.name,
                arguments=arguments,
                raw_arguments=raw,
            )
        )
    text = message.content if message.content is not None else message.refusal
    return Choice(
        index=choice.index or 0,
        message=Message(role="assistant", content=text, tool_calls=calls),
        finish_reason=finish_reason(choice.finish_reason),
    )


def chunk_from(chunk: object, *, provider: str, model: str) -> ChatChunk:
    """A ChatChunk from a ChatCompletionChunk (first choice); MalformedResponse if odd."""
    try:
        if not isinstance(chunk, ChatCompletionChunk):
            raise TypeError("the event is not a chat completion chunk")
        text, reasoning, finish = "", "", None
        deltas: list[ToolCallDelta] = []
        for choice in chunk.choices or []:
            if choice.index:
                continue  # only one choice is ever requested
            delta = choice.delta
            if delta is not None:
                text += delta.content or ""
                reasoning += _reasoning(delta)
                for position, call in enumerate(delta.tool_calls or []):
                    function = call.function
                    deltas.append(
                        ToolCallDelta(
                            index=call.index if isinstance(call.index, int) else position,
                            id=call.id,
                            name=function.name if function else None,
                            arguments=(function.arguments if function else None) or "",
                        )
                    )
            finish = finish_reason(choice.finish_reason) or finish
        return ChatChunk(
            text=text,
            reasoning=reasoning,
            tool_calls=deltas,
            finish_reason=finish,
            usage=usage_from(chunk.usage) if chunk.usage is not None else None,
            id=chunk.id,
            model=chunk.model,
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedResponse(
            f"unexpected stream event: {exc}", provider=provider, model=model
        ) from exc


def _reasoning(delta: Any) -> str:
    # not in OpenAI's schema: llama.cpp and DeepSeek say `reasoning_content`, OpenRouter `reasoning`
    for key in ("reasoning_content", "reasoning"):
        value = getattr(delta, key, None)
        if isinstance(value, str):
            return value
    return ""


def is_empty(chunk: ChatChunk) -> bool:
    """True for a chunk that carries nothing (e.g. the opening `role` delta)."""
    return not (
        chunk.text
        or chunk.reasoning
        or chunk.tool_calls
        or chunk.finish_reason
        or chunk.usage
        or chunk.cost_usd is not None
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

    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return err(ProviderTimeout, "no answer in time")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        if isinstance(cause, LlmError):  # raised by a client hook (opencrab.instance)
            return cause
        if streaming:
            return err(StreamInterrupted, f"the stream broke off: {cause}")
        return err(ProviderUnreachable, f"cannot connect: {cause}")
    if isinstance(exc, openai.APIStatusError):
        return llm_error_for_status(
            exc.status_code, _error_message(exc), provider=provider, model=model
        )
    if isinstance(
        exc, openai.APIResponseValidationError | json.JSONDecodeError | pydantic.ValidationError
    ):
        return err(MalformedResponse, f"the reply does not parse: {exc}")
    if isinstance(exc, openai.APIError):  # an error event inside a stream
        body = exc.body if isinstance(exc.body, dict) else {}
        return error_in_body(
            {**body, "message": exc.message},
            provider=provider,
            model=model,
            where="error event in the stream",
        )
    if isinstance(exc, ValueError):
        return err(ProviderBadRequest, f"invalid request: {exc}")
    return err(LlmError, f"{type(exc).__name__}: {exc}")


def error_in_body(
    error: dict[str, Any], *, provider: str, model: str | None, where: str = "error in the reply"
) -> LlmError:
    """The LlmError for an `{"code", "message"}` error object sent with a 200 status.

    A `code` that is an HTTP error status maps like that status; any other (a string such
    as "server_error", or none) is ProviderServerError.
    """
    message = error.get("message")
    text = message if isinstance(message, str) and message else str(error)[:500]
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        cls = type(llm_error_for_status(code, text))
        return cls(f"{where} (code {code}): {text}", provider=provider, model=model, status=code)
    return ProviderServerError(f"{where}: {text}", provider=provider, model=model)


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():  # a body that is not JSON (a proxy's page)
        return body.strip()[:500]
    return exc.message
