"""Seed 003's NormalizedMessage: the one type of a normalized transcript line.

The parsers (`codex`, `claude`) build each message as its JSON form (a dict, for speed:
a file holds hundreds of thousands of lines); `NORMALIZED_ADAPTER` validates that form,
and the API (`GET /api/imports/sessions/{id}/messages`) serves it with this model as its
schema. Field names are the seed's own (snake_case).

Example:
    transcript = codex.parse_lines(lines, "rollout.jsonl")
    NORMALIZED_ADAPTER.validate_python(transcript.messages)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SourceType = Literal["message", "tool_call", "tool_result", "meta", "session", "legacy"]
Role = Literal["user", "assistant", "tool", "system", "meta"]


class MessageSegment(BaseModel):
    """Seed 003 MessageSegment."""

    model_config = ConfigDict(extra="forbid")

    channel: Literal["input", "output", "system"]
    type: Literal["text", "image"]
    format: str
    text: str | None = None
    media: dict[str, Any] | None = None
    annotations: list[Any] = Field(default_factory=list)


class ToolCall(BaseModel):
    """A tool_call or tool_result message's call: id, name, status, arguments, output."""

    model_config = ConfigDict(extra="allow")

    call_id: str | None = None
    name: str | None = None
    status: str | None = None
    arguments: Any = None
    arguments_json: Any = None
    input: Any = Field(default=None, description="A custom_tool_call's input (seed 003).")
    input_json: Any = None
    output: Any = None
    output_json: Any = None


class RawRef(BaseModel):
    """Where the message came from; `encrypted_content` only with `?includeRaw=true`."""

    model_config = ConfigDict(extra="allow")

    event_type: str
    payload_type: str | None = None
    file_path: str
    line_index: int
    encrypted_content: str | None = None
    encrypted_sha256: str | None = None


class NormalizedMessage(BaseModel):
    """Seed 003 NormalizedMessage (field names as the seed writes them)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(examples=["2025-10-11T10:19:50.935Z#23"])
    timestamp: str
    role: Role
    source_type: SourceType
    segments: list[MessageSegment]
    tool_call: ToolCall | None = None
    raw: RawRef
    metadata: dict[str, Any] | None = None


NORMALIZED_ADAPTER: TypeAdapter[list[NormalizedMessage]] = TypeAdapter(list[NormalizedMessage])
"""Validates a parser's messages (their JSON form) as NormalizedMessages."""
