"""Codex CLI rollouts → NormalizedMessage records (seed 003).

A rollout is JSON Lines. Two formats exist:

- the event stream (Codex CLI 0.44+): every line is `{"timestamp", "type", "payload"}`
  with `type` one of session_meta, response_item (message, reasoning, function_call,
  function_call_output, custom_tool_call, custom_tool_call_output, web_search_call, …),
  turn_context, event_msg (token_count, agent_message, user_message, …) and compacted;
- the legacy format (before 2025-09): a header line with `id` and `instructions`, then
  `{"record_type": "state"}` lines, `{"record_type": "message", "role", "text"}` lines
  and bare response items, mostly without timestamps.

`parse_lines` turns each line into exactly one NormalizedMessage, or reports it as a
problem (file, line, reason): a line that is not JSON, not an object, or cut off at the
end of the file. A type nobody has seen is kept as a `meta` message with the SHA-256 of
the line in `raw.payload_sha256` (not its text: the line need not be a transcript's) and
reported too, so every input line is accounted for. Blank lines are
counted, nothing else is skipped.

Field rules (seed 003): `id` is `timestamp#line` (1-based line number); roles user,
assistant, tool, system, meta; `source_type` message, tool_call, tool_result, meta,
session, legacy; message content becomes segments with channel (input_* → input,
output_* → output), type (text, image) and format (the original content type), text
sanitised with an allow-list (p, pre, code, strong, em, ul, ol, li, a); tool calls and
their outputs are joined by call_id, arguments and outputs parsed as JSON when they parse
(the raw string is kept; a custom_tool_call keeps its `status` and `input`); encrypted
reasoning is kept in `raw.encrypted_content` and shown only as its SHA-256; `event_msg`
kinds go to `metadata.event_kind`. Injected context (environment context, AGENTS.md or
user instructions sent as a user message) is a `system` message, not something the user
said.

Token usage comes from `token_count` events: a call is counted only when the cumulative
total changes (Codex repeats snapshots), `info: null` is skipped, and cached and
reasoning tokens stay inside input and output (never added on top).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opencrab.importers.common import (
    Problem,
    Transcript,
    UsageCall,
    described,
    find_files,
    image_segment,
    injected_kind,
    json_lines,
    json_of,
    millis_between,
    name_of,
    normalized_message,
    parse_path,
    parse_time,
    sanitize,
    text_segments,
    unread_payload,
    unreadable,
)

__all__ = [
    "ParsedRollout",
    "Problem",
    "UsageCall",
    "find_rollouts",
    "parse_file",
    "parse_lines",
]

INJECTED_PREFIXES = (
    ("<environment_context>", "environment_context"),
    ("<user_instructions>", "user_instructions"),
    ("# agents.md instructions", "agents_md"),
    ("<instructions>", "instructions"),
    ("<permissions instructions>", "permissions"),
)
TOOL_CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
TOOL_OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
KNOWN_EVENT_TYPES = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
LEGACY_ITEM_TYPES = {"message", "reasoning"} | TOOL_CALL_TYPES | TOOL_OUTPUT_TYPES
TITLE_CHARS = 200

ParsedRollout = Transcript
"""A parsed rollout (the importers' shared Transcript)."""


def find_rollouts(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[Problem]]:
    """`rollout-*.jsonl[.zst]` files under the paths (files are taken as given)."""
    return find_files(paths, "rollout-*.jsonl*", (".jsonl", ".jsonl.zst"))


# ------------------------------------------------------------------ the parser
class State:
    """What reading a rollout remembers from line to line."""

    def __init__(self, result: ParsedRollout, mtime: float | None) -> None:
        self.result = result
        self.calls: dict[str, dict[str, Any]] = {}  # call_id -> the tool_call message
        self.last_total: dict[str, int] | None = None
        self.base_time: datetime | None = None
        self.mtime = mtime
        self.last_timestamp: str | None = None
        self.input_at: str | None = None  # the latest input item (user message, tool output)
        self.awaiting_reply = False  # an input came after the last output: the model speaks
        self.call_start: str | None = None  # the input the model call in progress answers


def parse_file(path: Path, *, skip_lines: int = 0) -> ParsedRollout:
    """Parse a rollout; `skip_lines` lines at the start were imported before."""
    return parse_path(parse_lines, path, skip_lines)


def parse_lines(
    lines: Iterable[bytes],
    file_path: str,
    *,
    skip_lines: int = 0,
    mtime: float | None = None,
) -> ParsedRollout:
    """See the module docstring. The header and token state are rebuilt from skipped
    lines too (cheaply: only session_meta, turn_context and token_count are read)."""
    return read(lines, file_path, skip_lines, mtime, _normalized)


def read(
    lines: Iterable[bytes],
    file_path: str,
    skip_lines: int,
    mtime: float | None,
    step: Callable[[State, dict[str, Any], int], None],
) -> ParsedRollout:
    """The line loop both readers (this one and `codex_scan`) share: `step` handles
    each new line; the lines imported before only rebuild the state."""
    result = ParsedRollout(file_path=file_path, source="codex")
    state = State(result, mtime)
    for index, event in json_lines(lines, result, skip_lines):
        if index < skip_lines:
            _replay(state, event, index + 1)
        else:
            step(state, event, index)
    result.ended_at = state.last_timestamp
    return result


def _normalized(state: State, event: dict[str, Any], index: int) -> None:
    try:
        message = _normalize(state, event, index)
    except Exception as exc:  # a shape no rule foresaw: reported, the file goes on
        unreadable(state.result, index, exc)
        message = _kept(state, event, index, "unreadable")
    state.result.count(message["source_type"])
    state.result.messages.append(message)


def _replay(state: State, event: dict[str, Any], number: int) -> None:
    """Rebuild header and token state from a line imported before."""
    kind = name_of(event.get("type"))
    payload = event.get("payload")
    if kind == "session_meta" and isinstance(payload, dict):
        _session_meta(state, payload, event.get("timestamp"))
    elif kind == "turn_context" and isinstance(payload, dict):
        _turn_context(state, payload)
    elif kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":
        _token_count(state, payload, str(event.get("timestamp") or ""), number, count=False)
    elif number == 1 and "id" in event and "type" not in event:
        _legacy_header(state, event)
    item = payload if kind == "response_item" and isinstance(payload, dict) else event
    item_type = name_of(item.get("type")) or name_of(event.get("record_type"))
    if item_type in TOOL_CALL_TYPES:  # outputs in the new lines may answer it
        call_id = item.get("call_id") or item.get("id")
        if isinstance(call_id, str):
            state.calls[call_id] = {
                "tool_call": {"name": _tool_name(item), "status": item.get("status")},
                "raw": {"line_index": number - 1},
            }
    if isinstance(event.get("timestamp"), str):
        state.last_timestamp = event["timestamp"]


# ------------------------------------------------------------------ one line
def _normalize(state: State, event: dict[str, Any], index: int) -> dict[str, Any]:
    number = index + 1
    result = state.result
    kind = name_of(event.get("type"))
    payload = event.get("payload")
    if kind in KNOWN_EVENT_TYPES and isinstance(payload, dict):
        timestamp = _timestamp(state, event, index)
        if kind == "response_item":
            return _response_item(state, payload, timestamp, index, "response_item")
        if kind == "event_msg":
            return _event_msg(state, payload, timestamp, index)
        if kind == "session_meta":
            _session_meta(state, payload, timestamp)
            return normalized_message(
                state.result.file_path,
                timestamp,
                index,
                role="meta",
                source_type="session",
                event_type="session_meta",
                metadata={k: v for k, v in payload.items() if k != "base_instructions"},
                raw_extra={"payload": payload},
            )
        if kind == "turn_context":
            _turn_context(state, payload)
            return normalized_message(
                state.result.file_path,
                timestamp,
                index,
                role="meta",
                source_type="meta",
                event_type="turn_context",
                metadata={"event_kind": "turn_context", "turn_context": payload},
            )
        # compacted: the history was summarised
        history = payload.get("replacement_history")
        return normalized_message(
            state.result.file_path,
            timestamp,
            index,
            role="meta",
            source_type="meta",
            event_type="compacted",
            segments=text_segments(payload.get("message"), "system", "compacted_summary"),
            metadata={
                "event_kind": "compacted",
                "replacement_items": len(history) if isinstance(history, list) else 0,
            },
        )
    # the legacy format
    if number == 1 and "id" in event and "type" not in event and "record_type" not in event:
        _legacy_header(state, event)
        return normalized_message(
            state.result.file_path,
            _timestamp(state, event, index),
            index,
            role="meta",
            source_type="session",
            event_type="legacy_session_entry",
            metadata={k: v for k, v in event.items() if k != "instructions"},
            raw_extra={"payload": event},
        )
    if "record_type" in event:
        result.legacy = True
        record = legacy_record(state, event, index)
        if record is not None:
            return _response_item(state, record, _timestamp(state, event, index), index, "legacy")
        return normalized_message(
            state.result.file_path,
            _timestamp(state, event, index),
            index,
            role="meta",
            source_type="meta",
            event_type="legacy_record",
            payload_type=str(event.get("record_type")),
            metadata={"event_kind": f"legacy_{event.get('record_type')}"},
        )
    if kind in LEGACY_ITEM_TYPES:
        result.legacy = True
        return _response_item(state, event, _timestamp(state, event, index), index, "legacy")
    # a shape nobody has seen: kept, and reported
    result.problems.append(
        Problem(result.file_path, number, f"unknown event ({unknown_event(event)}); kept as meta")
    )
    return _kept(state, event, index, str(kind) if kind is not None else "unknown")


def _kept(state: State, event: dict[str, Any], index: int, event_type: str) -> dict[str, Any]:
    """A line no rule reads, as a meta message with its SHA-256 in `raw.payload_sha256`."""
    return normalized_message(
        state.result.file_path,
        _timestamp(state, event, index),
        index,
        role="meta",
        source_type="meta",
        event_type=event_type,
        metadata={"event_kind": "unknown"},
        raw_extra=unread_payload(event),
    )


def _response_item(
    state: State, payload: dict[str, Any], timestamp: str, index: int, event_type: str
) -> dict[str, Any]:
    item = name_of(payload.get("type"))
    legacy = event_type == "legacy"
    if item == "message":
        role = payload.get("role")
        segments = _content_segments(payload.get("content"), role)
        injected = _injected(role, payload.get("content"))
        metadata: dict[str, Any] = {}
        if injected:
            metadata["injected"] = injected
        if payload.get("phase"):
            metadata["phase"] = payload["phase"]
        if role == "user":
            _input(state, timestamp)
            if not injected and state.result.title is None:
                state.result.title = _title(segments)
        elif role == "assistant":
            _output(state)
        return normalized_message(
            state.result.file_path,
            timestamp,
            index,
            role="system" if injected else _role(role),
            source_type="legacy" if legacy else "message",
            event_type=event_type,
            payload_type="message",
            segments=segments,
            metadata=metadata or None,
        )
    if item == "reasoning":
        _output(state)
        encrypted = payload.get("encrypted_content")
        summary = [
            s.get("text", "")
            for s in _list(payload.get("summary"))
            if isinstance(s, dict) and isinstance(s.get("text"), str)
        ]
        raw_extra: dict[str, Any] = {}
        if isinstance(encrypted, str):
            raw_extra["encrypted_content"] = encrypted
            raw_extra["encrypted_sha256"] = hashlib.sha256(encrypted.encode()).hexdigest()
        return normalized_message(
            state.result.file_path,
            timestamp,
            index,
            role="assistant",
            source_type="meta",
            event_type=event_type,
            payload_type="reasoning",
            metadata={"event_kind": "reasoning", "summary": summary},
            raw_extra=raw_extra,
        )
    if item in TOOL_CALL_TYPES:
        _output(state)
        call_id = payload.get("call_id") or payload.get("id")
        tool: dict[str, Any] = {
            "call_id": call_id,
            "name": _tool_name(payload),
            "status": payload.get("status"),
        }
        if item == "custom_tool_call":  # seed 003: its status and input are kept as such
            tool["input"] = payload.get("input")
            tool["input_json"] = json_of(tool["input"])
        else:
            tool["arguments"] = payload.get("arguments", payload.get("action"))
            tool["arguments_json"] = json_of(tool["arguments"])
        message = normalized_message(
            state.result.file_path,
            timestamp,
            index,
            role="tool",
            source_type="tool_call",
            event_type=event_type,
            payload_type=str(item),
            tool_call=tool,
        )
        if isinstance(call_id, str):
            state.calls[call_id] = message
        return message
    if item in TOOL_OUTPUT_TYPES:
        call_id = payload.get("call_id")
        output = payload.get("output")
        call = state.calls.get(call_id) if isinstance(call_id, str) else None
        tool = {
            "call_id": call_id,
            "name": None if call is None else call["tool_call"]["name"],
            "status": None if call is None else call["tool_call"]["status"],
            "output": output,
            "output_json": json_of(output),
        }
        if call is None:
            state.result.problems.append(
                Problem(
                    state.result.file_path,
                    index + 1,
                    f"tool output for call_id {call_id!r} with no call before it",
                )
            )
        else:
            call["tool_call"]["output"] = output
            call["tool_call"]["output_json"] = tool["output_json"]
        _input(state, timestamp)
        return normalized_message(
            state.result.file_path,
            timestamp,
            index,
            role="tool",
            source_type="tool_result",
            event_type=event_type,
            payload_type=str(item),
            tool_call=tool,
            raw_extra=None if call is None else {"call_line_index": call["raw"]["line_index"]},
        )
    state.result.problems.append(
        Problem(
            state.result.file_path,
            index + 1,
            f"unknown {event_type} type {described(payload.get('type'))}; kept as meta",
        )
    )
    return normalized_message(
        state.result.file_path,
        timestamp,
        index,
        role="meta",
        source_type="meta",
        event_type=event_type,
        payload_type=str(item),
        metadata={"event_kind": "unknown"},
        raw_extra={"payload": payload},
    )


def _event_msg(state: State, payload: dict[str, Any], timestamp: str, index: int) -> dict[str, Any]:
    kind = payload.get("type")
    metadata: dict[str, Any] = {"event_kind": kind}
    segments: list[dict[str, Any]] = []
    if kind == "token_count":
        info = payload.get("info")
        metadata["token_count"] = info
        usage = _token_count(state, payload, timestamp, index + 1, count=True)
        metadata["counted"] = usage is not None
    elif kind in ("agent_message", "user_message"):
        channel = "output" if kind == "agent_message" else "input"
        segments = text_segments(payload.get("message"), channel, kind)
    elif kind == "agent_reasoning":
        segments = text_segments(payload.get("text"), "system", kind)
    else:
        metadata.update({k: v for k, v in payload.items() if k != "type"})
    return normalized_message(
        state.result.file_path,
        timestamp,
        index,
        role="meta",
        source_type="meta",
        event_type="event_msg",
        payload_type=str(kind),
        segments=segments,
        metadata=metadata,
    )


# ------------------------------------------------------------------ state updates
def _session_meta(state: State, payload: dict[str, Any], timestamp: Any) -> None:
    result = state.result
    result.session_id = str(payload.get("id") or result.session_id or "") or None
    started = payload.get("timestamp") or timestamp
    if isinstance(started, str) and result.started_at is None:
        result.started_at = started
    result.provider = name_of(payload.get("model_provider")) or result.provider
    result.header.update(
        {k: v for k, v in payload.items() if k not in ("base_instructions", "instructions")}
    )


def _turn_context(state: State, payload: dict[str, Any]) -> None:
    model = payload.get("model")
    if isinstance(model, str) and model:
        state.result.model = model
    state.result.header["turn_context"] = payload


def _legacy_header(state: State, event: dict[str, Any]) -> None:
    result = state.result
    result.legacy = True
    result.session_id = str(event.get("id"))
    if isinstance(event.get("timestamp"), str):
        result.started_at = event["timestamp"]
    result.header.update({k: v for k, v in event.items() if k != "instructions"})


def _token_count(
    state: State, payload: dict[str, Any], timestamp: str, number: int, *, count: bool
) -> UsageCall | None:
    info = payload.get("info")
    if not isinstance(info, dict):
        return None  # info: null — a rate-limit-only snapshot
    total = _usage_numbers(info.get("total_token_usage"))
    if total is None or total == state.last_total:
        return None  # a repeated snapshot
    previous = state.last_total
    state.last_total = total
    state.result.total_usage = total
    if not count:
        return None
    last = _usage_numbers(info.get("last_token_usage"))
    if last is None:  # derive the call from the cumulative difference
        last = {k: total[k] - (previous or {}).get(k, 0) for k in total}
    call = UsageCall(
        timestamp=timestamp,
        line=number,
        model=state.result.model,
        input_tokens=last["input_tokens"],
        cached_input_tokens=last["cached_input_tokens"],
        output_tokens=last["output_tokens"],
        reasoning_output_tokens=last["reasoning_output_tokens"],
        total_tokens=last["total_tokens"],
        latency_ms=millis_between(state.call_start, timestamp),
    )
    state.call_start = None
    state.result.usage.append(call)
    return call


USAGE_KEYS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)


def _usage_numbers(value: Any) -> dict[str, int] | None:
    if type(value) is not dict:
        return None
    numbers = {}
    for key in USAGE_KEYS:
        number = value.get(key, 0)
        if type(number) is not int or number < 0:  # `true` is no count
            return None
        numbers[key] = number
    if not numbers["total_tokens"]:
        numbers["total_tokens"] = numbers["input_tokens"] + numbers["output_tokens"]
    return numbers


def _input(state: State, timestamp: str) -> None:
    state.input_at = timestamp
    state.awaiting_reply = True


def _output(state: State) -> None:
    """The first output of a model call: the call answers the latest input."""
    state.awaiting_reply = False
    if state.call_start is None:
        state.call_start = state.input_at


def legacy_record(state: State, event: dict[str, Any], index: int) -> dict[str, Any] | None:
    """A legacy `record_type` line as the response item it stands for, or None (`state`).

    `{"record_type": "message", "role", "text"}` is a message (seed 003: role and text are
    read directly); without a role the order of speech tells (after an input the assistant
    speaks, else the user); a message without text is reported and kept with no segments.
    Other record types that name a response item (function_call, reasoning, …) read as one.
    """
    record = name_of(event.get("record_type"))
    if record not in LEGACY_ITEM_TYPES:
        return None
    item = {k: v for k, v in event.items() if k != "record_type"}
    item["type"] = record
    if record != "message":
        return item
    if "content" not in item:
        text = item.pop("text", None)
        if isinstance(text, str):
            item["content"] = text
        else:
            state.result.problems.append(
                Problem(
                    state.result.file_path,
                    index + 1,
                    f"legacy message without text (text {described(text)}); kept with no segments",
                )
            )
    if item.get("role") is None:
        item["role"] = "assistant" if state.awaiting_reply else "user"
    return item


def _title(segments: list[dict[str, Any]]) -> str | None:
    text = " ".join(s["text"] for s in segments if s.get("type") == "text").strip()
    return " ".join(text.split())[:TITLE_CHARS] or None


# ------------------------------------------------------------------ pieces
def _timestamp(state: State, event: dict[str, Any], index: int) -> str:
    """The line's timestamp; legacy lines without one: the session start + 1 s per line,
    else the file's mtime + 1 s per line (seed 003's order of preference)."""
    value = event.get("timestamp")
    if isinstance(value, str) and value:
        state.last_timestamp = value
        if state.base_time is None:
            state.base_time = parse_time(value)
        return value
    if state.base_time is None and state.result.started_at:
        state.base_time = parse_time(state.result.started_at)
    base = state.base_time
    if base is None:
        base = datetime.fromtimestamp(state.mtime or 0, UTC)
        state.base_time = base
    moment = base + timedelta(seconds=index)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unknown_event(event: dict[str, Any]) -> str:
    """What is wrong with a line no rule reads, for its problem report."""
    kind = event.get("type")
    if kind is None:
        return "no type"
    if name_of(kind) in KNOWN_EVENT_TYPES:
        return f"{kind} without an object payload"
    return kind if type(kind) is str else f"type {described(kind)}"


def _list(value: Any) -> list[Any]:
    return value if type(value) is list else []


def _tool_name(item: dict[str, Any]) -> str:
    name = item.get("name")
    return name if isinstance(name, str) and name else str(item.get("type")).removesuffix("_call")


def _role(value: Any) -> str:
    if value in ("user", "assistant"):
        return str(value)
    if value in ("developer", "system"):
        return "system"
    if value == "tool":
        return "tool"
    return "meta"


def _content_segments(content: Any, role: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):  # legacy text: the speaker tells the channel
        return text_segments(content, "output" if role == "assistant" else "input", "text")
    segments: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        fmt = str(part.get("type") or "unknown")
        channel = (
            "input"
            if fmt.startswith("input")
            else "output"
            if fmt.startswith("output")
            else "system"
        )
        if "image" in fmt:
            url = part.get("image_url") or part.get("url")
            segments.append(image_segment(channel, fmt, url))
        elif isinstance(part.get("text"), str):
            segments.append(
                {
                    "channel": channel,
                    "type": "text",
                    "format": fmt,
                    "text": sanitize(part["text"]),
                    "annotations": [],
                }
            )
    return segments


def _injected(role: Any, content: Any) -> str | None:
    """The kind of context Codex injected as a user message, or None (read before any
    sanitising: the markers are tags an HTML allow-list would strip)."""
    if role != "user":
        return None
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    parts = content if isinstance(content, list) else []
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return injected_kind(texts, INJECTED_PREFIXES)
