"""What one recorded event, memory line or session message may store (`[agent] max_event_bytes`).

A model's reply, its tool-call arguments and an action's output are stored as the turn's
AgentEvents, memory session logs and session messages. Without a cap one reply can add
hundreds of megabytes to the database, outside any quota. The recorder passes every row
through here first:

- a text (a message, reasoning, a tool result's output, a log line) longer than the cap
  in UTF-8 bytes keeps its first `max_bytes` bytes (never half a character) followed by
  the marker `…[cut: N bytes in full]`;
- tool-call arguments whose JSON is longer keep their keys: small values stay whole and
  the large ones share what is left, each cut as above (a value that is not a string is
  cut as its JSON text); arguments that are not an object, or still too long, become
  their JSON text, cut;
- a cut event records the full sizes in its metadata: `{"cut": {"arguments": 211000000}}`.

Example:
    capped = cap_event(event, 262_144)
    capped.metadata["cut"]   # {"text": 5000000} when the text was cut
"""

from __future__ import annotations

from typing import Any

import orjson

from opencrab.core.memory import SessionLog
from opencrab.core.sessions import Said
from opencrab.events import (
    AgentEvent,
    MessagePayload,
    Payload,
    ReasoningPayload,
    ToolCallPayload,
    ToolResultPayload,
    UserPayload,
)

_TEXT_FIELDS: dict[type[Any], str] = {
    UserPayload: "text",
    ReasoningPayload: "text",
    MessagePayload: "text",
    ToolResultPayload: "output",
}


def cut_marker(full_bytes: int) -> str:
    """The marker that ends a cut text."""
    return f"\n…[cut: {full_bytes} bytes in full]"


def cut_text(text: str, max_bytes: int) -> tuple[str, int | None]:
    """(text, None) when it fits in `max_bytes` UTF-8 bytes, else (cut text, full size)."""
    if len(text) * 4 <= max_bytes:  # fits whatever the characters are
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, None
    end = max(max_bytes, 0)
    while end > 0 and data[end] & 0xC0 == 0x80:  # not inside a character
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass") + cut_marker(len(data)), len(data)


def cut_arguments(arguments: Any, max_bytes: int) -> tuple[Any, int | None]:
    """(arguments, None) when their JSON fits, else (cut arguments, full JSON size)."""
    try:
        raw = orjson.dumps(arguments)
    except (orjson.JSONEncodeError, TypeError):
        return arguments, None  # not storable as JSON anyway; the event log says why
    full = len(raw)
    if full <= max_bytes:
        return arguments, None
    if isinstance(arguments, dict) and arguments:
        sizes = {key: len(orjson.dumps(value)) for key, value in arguments.items()}
        share = max_bytes // len(sizes)
        large = [key for key, size in sizes.items() if size > share]
        left = max_bytes - sum(size for key, size in sizes.items() if key not in large)
        each = max(left // max(len(large), 1), 0)
        cut = {
            key: _cut_value(value, each) if key in large else value
            for key, value in arguments.items()
        }
        if len(orjson.dumps(cut)) <= max_bytes + len(large) * 64:  # markers allowed for
            return cut, full
    return cut_text(raw.decode("utf-8", "surrogatepass"), max_bytes)[0], full


def _cut_value(value: Any, max_bytes: int) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return cut_text(text, max_bytes)[0]


def cap_event(event: AgentEvent, max_bytes: int) -> AgentEvent:
    """The event as it may be stored: its large text or arguments cut, full sizes noted."""
    capped = cap_payload(event.content, event.metadata, max_bytes)
    if capped is None:
        return event
    content, metadata = capped
    return event.model_copy(update={"content": content, "metadata": metadata})


def cap_payload(content: Payload, metadata: Any, max_bytes: int) -> tuple[Payload, Any] | None:
    """An event's payload and metadata as they may be stored (`cap_event`), or None when
    nothing needs cutting (the turn recorder caps its own records with this)."""
    cut: dict[str, int] = {}
    update: dict[str, Any] = {}
    if isinstance(content, ToolCallPayload):
        arguments, full = cut_arguments(content.arguments, max_bytes)
        if full is not None:
            cut["arguments"], update["arguments"] = full, arguments
    else:
        name = _TEXT_FIELDS.get(type(content))
        if name is not None:
            text, full = cut_text(getattr(content, name), max_bytes)
            if full is not None:
                cut[name], update[name] = full, text
    if not cut:
        return None
    metadata = {**metadata, "cut": cut} if isinstance(metadata, dict) else {"cut": cut}
    return content.model_copy(update=update), metadata


def cap_log(line: SessionLog, max_bytes: int) -> SessionLog:
    """A memory session log with its content cut to `max_bytes`."""
    text, full = cut_text(line.content, max_bytes)
    return line if full is None else line.model_copy(update={"content": text})


def cap_said(said: Said, max_bytes: int) -> Said:
    """A session message with its content cut to `max_bytes`."""
    text, full = cut_text(said.content, max_bytes)
    return said if full is None else said._replace(content=text)
