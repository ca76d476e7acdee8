"""Gemini `generateContent` wire format ⇄ the neutral types (see `google` for the decisions)."""

from __future__ import annotations

import json
import mimetypes
import uuid
from collections import OrderedDict
from typing import Any

from opencrab.errors import MalformedResponse, ProviderBadRequest
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
    ToolChoice,
    ToolDefinition,
    Usage,
)

SKIP_SIGNATURE = "skip_thought_signature_validator"
"""Google's documented stand-in for a thought signature we do not have."""

FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
"""Gemini finish reasons; anything else (MALFORMED_FUNCTION_CALL, OTHER, …) is "error"."""

SCHEMA_KEYS = {
    "type", "format", "title", "description", "nullable", "enum", "properties", "required",
    "items", "minItems", "maxItems", "anyOf", "minimum", "maximum", "minLength", "maxLength",
    "pattern", "minProperties", "maxProperties", "propertyOrdering",
}  # fmt: skip
"""JSON Schema keys Gemini's OpenAPI-style `Schema` accepts; the others are dropped."""

SCHEMA_FORMATS = {"enum", "date-time", "float", "double", "int32", "int64"}


class SignatureMemory:
    """Thought signatures of recent function calls by ToolCall id (bounded, oldest dropped)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: OrderedDict[str, str] = OrderedDict()

    def remember(self, call_id: str, signature: str) -> None:
        self._items[call_id] = signature
        self._items.move_to_end(call_id)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, call_id: str) -> str | None:
        return self._items.get(call_id)


def new_call_id() -> str:
    """A fresh ToolCall id (Gemini's API does not give calls ids)."""
    return f"call_{uuid.uuid4().hex[:24]}"


# ------------------------------------------------------------------ requests
def wire_request(request: ChatRequest, signatures: SignatureMemory) -> dict[str, Any]:
    """The generateContent body for a request; ValueError for what Gemini cannot take."""
    system = [{"text": m.text} for m in request.messages if m.role == "system" and m.text]
    body: dict[str, Any] = {"contents": wire_contents(request.messages, signatures)}
    if system:
        body["systemInstruction"] = {"parts": system}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [wire_tool(t) for t in request.tools]}]
        if request.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": wire_tool_choice(request.tool_choice)}
    config = request.sampling("maxOutputTokens", "stopSequences")
    if config:
        body["generationConfig"] = config
    return body


def wire_contents(messages: list[Message], signatures: SignatureMemory) -> list[dict[str, Any]]:
    """Gemini `contents`: user/model turns, tool results as user functionResponse parts."""
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "assistant":
            role, parts = "model", content_parts(message) + call_parts(message, signatures)
            names.update((call.id, call.name) for call in message.tool_calls)
        elif message.role == "tool":
            role, parts = "user", [function_response(message, names)]
        else:
            role, parts = "user", content_parts(message)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def content_parts(message: Message) -> list[dict[str, Any]]:
    """Text and image parts of a message."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                parts.append({"text": part.text})
        else:
            parts.append(image_part(part))
    return parts


def image_part(part: ImagePart) -> dict[str, Any]:
    """inlineData for a data URL, fileData (MIME type guessed from the URL) for a link."""
    if part.is_data_url:
        mime, data = part.data()
        return {"inlineData": {"mimeType": mime, "data": data}}
    mime = mimetypes.guess_type(part.url.split("?", 1)[0])[0] or "image/jpeg"
    return {"fileData": {"mimeType": mime, "fileUri": part.url}}


def call_parts(message: Message, signatures: SignatureMemory) -> list[dict[str, Any]]:
    """functionCall parts, with their thought signatures (or the stand-in on the first)."""
    parts: list[dict[str, Any]] = []
    for call in message.tool_calls:
        part: dict[str, Any] = {"functionCall": {"name": call.name, "args": _args(call)}}
        signature = signatures.get(call.id)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    if parts and not any("thoughtSignature" in p for p in parts):
        parts[0]["thoughtSignature"] = SKIP_SIGNATURE
    return parts


def _args(call: ToolCall) -> dict[str, Any]:
    arguments = call.arguments
    if isinstance(arguments, str):
        arguments, _ = parse_arguments(arguments)
    return arguments if isinstance(arguments, dict) else {"value": arguments}


def function_response(message: Message, names: dict[str, str]) -> dict[str, Any]:
    """A functionResponse part; the function name comes from the message or its call."""
    name = message.name or names.get(message.tool_call_id or "")
    if not name:
        raise ValueError(
            f"tool result {message.tool_call_id!r} answers no earlier assistant tool call; "
            "Gemini needs the function name: set Message.name on the tool message"
        )
    key = "error" if message.is_error else "output"
    return {"functionResponse": {"name": name, "response": {key: message.text}}}


def wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    """A functionDeclaration; `parameters` is left out when the function takes none."""
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if tool.parameters.get("properties"):
        declaration["parameters"] = wire_schema(tool.parameters)
    return declaration


def wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema → Gemini Schema: known keys kept, `type: [x, "null"]` → nullable."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            kinds = [k for k in value if k != "null"]
            if len(kinds) < len(value):
                out["nullable"] = True
            if len(kinds) == 1:
                out["type"] = kinds[0]
            elif kinds:
                out["anyOf"] = [{"type": k} for k in kinds]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {n: wire_schema(s) for n, s in value.items() if isinstance(s, dict)}
        elif key == "items" and isinstance(value, dict):
            out[key] = wire_schema(value)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            out["anyOf"] = [wire_schema(s) for s in value if isinstance(s, dict)]
        elif key == "const" and "enum" not in schema:
            out["enum"] = [value]
        elif key == "format":
            if value in SCHEMA_FORMATS:
                out[key] = value
        elif key in SCHEMA_KEYS:
            out[key] = value
    return out


def wire_tool_choice(choice: ToolChoice | str) -> dict[str, Any]:
    """functionCallingConfig: AUTO, NONE, ANY, or ANY limited to one named function."""
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
    if choice in modes:
        return {"mode": modes[choice]}
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


# ------------------------------------------------------------------ replies
def usage_from(meta: Any) -> Usage:
    """Usage from usageMetadata: thoughts added to the output, cached tokens inside input."""
    if not isinstance(meta, dict):
        return Usage()
    thoughts = int(meta.get("thoughtsTokenCount") or 0)
    total = meta.get("totalTokenCount")
    return Usage.of(
        int(meta.get("promptTokenCount") or 0),
        int(meta.get("candidatesTokenCount") or 0) + thoughts,
        total_tokens=int(total) if isinstance(total, int) else None,
        cache_read_tokens=int(meta.get("cachedContentTokenCount") or 0),
        reasoning_tokens=thoughts,
        raw=meta,
    )


def finish_from(raw: str | None, has_calls: bool) -> FinishReason | None:
    """The neutral finish reason; STOP with function calls is "tool_calls"."""
    if raw is None:
        return None
    finish = FINISH.get(raw, "error")
    return "tool_calls" if finish == "stop" and has_calls else finish


def candidate(body: dict[str, Any], *, provider: str, model: str) -> dict[str, Any] | None:
    """The first candidate; ProviderBadRequest when the prompt itself was blocked."""
    candidates = body.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        return candidates[0]
    feedback = body.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason"):
        detail = feedback.get("blockReasonMessage")
        raise ProviderBadRequest(
            f"the prompt was blocked: {feedback['blockReason']}"
            + (f" ({detail})" if detail else ""),
            provider=provider,
            model=model,
        )
    return None


def parts_of(cand: dict[str, Any]) -> list[dict[str, Any]]:
    content = cand.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def tool_call_from(part: dict[str, Any], signatures: SignatureMemory) -> ToolCall:
    """A ToolCall from a functionCall part; its thought signature is remembered by id."""
    call = part["functionCall"]
    call_id = str(call.get("id") or new_call_id())
    if isinstance(part.get("thoughtSignature"), str):
        signatures.remember(call_id, part["thoughtSignature"])
    args = call.get("args")
    return ToolCall(id=call_id, name=str(call.get("name", "")), arguments=args or {})


def response_from(
    body: dict[str, Any], *, provider: str, model: str, signatures: SignatureMemory
) -> ChatResponse:
    """A ChatResponse from a GenerateContentResponse."""
    cand = candidate(body, provider=provider, model=model)
    if cand is None:
        raise MalformedResponse("the reply has no candidates", provider=provider, model=model)
    parts = parts_of(cand)
    text = "".join(str(p["text"]) for p in parts if "text" in p and not p.get("thought"))
    calls = [
        tool_call_from(p, signatures) for p in parts if isinstance(p.get("functionCall"), dict)
    ]
    raw_finish = cand.get("finishReason") if isinstance(cand.get("finishReason"), str) else None
    message = Message(role="assistant", content=text or None, tool_calls=calls)
    return ChatResponse(
        id=str(body.get("responseId") or f"gemini-{uuid.uuid4().hex}"),
        model=str(body.get("modelVersion") or model),
        provider=provider,
        choices=[Choice(message=message, finish_reason=finish_from(raw_finish, bool(calls)))],
        usage=usage_from(body.get("usageMetadata")),
        raw_finish_reason=raw_finish,
    )


class StreamState:
    """Turns streamed GenerateContentResponses into ChatChunks; keeps finish and usage."""

    def __init__(self, *, provider: str, model: str, signatures: SignatureMemory) -> None:
        self.provider = provider
        self.model = model
        self.signatures = signatures
        self.calls = 0
        self.raw_finish: str | None = None
        self.usage: Usage | None = None

    def chunk(self, event: dict[str, Any]) -> ChatChunk:
        """The text, reasoning and tool calls of one event."""
        if isinstance(event.get("usageMetadata"), dict):
            self.usage = usage_from(event["usageMetadata"])
        chunk = ChatChunk(id=_text(event.get("responseId")), model=_text(event.get("modelVersion")))
        cand = candidate(event, provider=self.provider, model=self.model)
        if cand is None:
            return chunk
        for part in parts_of(cand):
            if isinstance(part.get("functionCall"), dict):
                call = tool_call_from(part, self.signatures)
                chunk.tool_calls.append(
                    ToolCallDelta(
                        index=self.calls,
                        id=call.id,
                        name=call.name,
                        arguments=json.dumps(call.arguments, ensure_ascii=False),
                    )
                )
                self.calls += 1
            elif isinstance(part.get("text"), str):
                if part.get("thought"):
                    chunk.reasoning += part["text"]
                else:
                    chunk.text += part["text"]
        if isinstance(cand.get("finishReason"), str):
            self.raw_finish = cand["finishReason"]
        return chunk

    def final(self) -> ChatChunk:
        """The closing chunk: finish reason and usage."""
        return ChatChunk(
            finish_reason=finish_from(self.raw_finish, self.calls > 0),
            usage=self.usage or Usage(),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def model_info(raw: dict[str, Any], *, provider: str) -> ModelInfo:
    """A ModelInfo from an entry of the models list."""
    model_id = str(raw.get("name", "")).removeprefix("models/")
    methods = raw.get("supportedGenerationMethods") or []
    chat = "generateContent" in methods
    window = raw.get("inputTokenLimit")
    return ModelInfo(
        id=model_id,
        provider=provider,
        context_window=window if isinstance(window, int) else None,
        supports_vision=chat and model_id.startswith("gemini"),
        supports_functions=chat,
    )
