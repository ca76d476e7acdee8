"""Codex rollouts, read for an import: what `parse_lines` finds, without building
NormalizedMessages.

`scan_lines` gives the same counts by source_type, problems, token calls, title and
header as `opencrab.importers.codex.parse_lines` (the tests check that they agree), plus
the `entries` that become AgentEvents; it is several times faster. The import stores
the lines themselves, and `parse_lines` normalizes them again whenever they are read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from opencrab.importers.codex import (
    KNOWN_EVENT_TYPES,
    LEGACY_ITEM_TYPES,
    TITLE_CHARS,
    TOOL_CALL_TYPES,
    TOOL_OUTPUT_TYPES,
    ParsedRollout,
    State,
    _injected,
    _input,
    _legacy_header,
    _output,
    _session_meta,
    _timestamp,
    _token_count,
    _tool_name,
    _turn_context,
    legacy_record,
    read,
    unknown_event,
)
from opencrab.importers.common import (
    Entry,
    Problem,
    described,
    json_of,
    name_of,
    unread,
    unreadable,
)

__all__ = ["scan_lines"]


def scan_lines(
    lines: Iterable[bytes],
    file_path: str,
    *,
    skip_lines: int = 0,
    mtime: float | None = None,
) -> ParsedRollout:
    """See the module docstring."""
    return read(lines, file_path, skip_lines, mtime, _scanned)


def _scanned(state: State, event: dict[str, Any], index: int) -> None:
    try:
        source_type = _scan(state, event, index)
    except Exception as exc:  # a shape no rule foresaw: reported, the file goes on
        unreadable(state.result, index, exc)
        source_type = "meta"
    kinds = state.result.kinds  # Transcript.count, inline: it runs for every line
    kinds[source_type] = kinds.get(source_type, 0) + 1


def _scan(state: State, event: dict[str, Any], index: int) -> str:
    """One line for the import: its source_type (as `_normalize` would give it), with the
    entry it contributes to the event log, if any."""
    kind = name_of(event.get("type"))
    payload = event.get("payload")
    if kind in KNOWN_EVENT_TYPES and type(payload) is dict:
        timestamp = event.get("timestamp")
        if type(timestamp) is str and timestamp and state.base_time is not None:
            state.last_timestamp = timestamp  # what _timestamp does for the usual line
        else:
            timestamp = _timestamp(state, event, index)
        if kind == "response_item":
            return _scan_item(state, payload, timestamp, index, legacy=False)
        if kind == "event_msg":
            if payload.get("type") == "token_count":
                usage = _token_count(state, payload, timestamp, index + 1, count=True)
                if usage is not None:
                    state.result.entries.append(Entry(index + 1, "usage", timestamp, usage=usage))
            return "meta"
        if kind == "session_meta":
            _session_meta(state, payload, timestamp)
            return "session"
        if kind == "turn_context":
            _turn_context(state, payload)
        return "meta"
    if index == 0 and "id" in event and "type" not in event and "record_type" not in event:
        _legacy_header(state, event)
        _timestamp(state, event, index)
        return "session"
    if "record_type" in event:
        state.result.legacy = True
        timestamp = _timestamp(state, event, index)
        record = legacy_record(state, event, index)
        if record is not None:
            return _scan_item(state, record, timestamp, index, legacy=True)
        return "meta"
    if kind in LEGACY_ITEM_TYPES:
        state.result.legacy = True
        return _scan_item(state, event, _timestamp(state, event, index), index, legacy=True)
    problem = f"unknown event ({unknown_event(event)}); kept as meta"
    state.result.problems.append(Problem(state.result.file_path, index + 1, problem))
    unread(state.result, index, event)  # stored as its SHA-256, not its text
    return "meta"


def _scan_item(
    state: State, payload: dict[str, Any], timestamp: str, index: int, *, legacy: bool
) -> str:
    item = name_of(payload.get("type"))
    entries = state.result.entries
    number = index + 1
    if item == "message":
        role = payload.get("role")
        content = payload.get("content")
        if role == "user":
            _input(state, timestamp)
            if _injected(role, content):
                return "legacy" if legacy else "message"
            text = _plain_text(content)
            if state.result.title is None:
                state.result.title = " ".join(text.split())[:TITLE_CHARS] or None
            entries.append(Entry(number, "user", timestamp, text))
        elif role == "assistant":
            _output(state)
            entries.append(Entry(number, "assistant", timestamp, _plain_text(content)))
        return "legacy" if legacy else "message"
    if item == "reasoning":
        _output(state)
        summary = payload.get("summary")
        if type(summary) is list:
            text = "\n\n".join(
                s["text"] for s in summary if type(s) is dict and type(s.get("text")) is str
            )
            if text:
                entries.append(Entry(number, "reasoning", timestamp, text))
        return "meta"
    if item in TOOL_CALL_TYPES:
        _output(state)
        call_id = payload.get("call_id") or payload.get("id")
        arguments = (
            payload.get("input")
            if item == "custom_tool_call"
            else payload.get("arguments", payload.get("action"))
        )
        parsed = json_of(arguments)
        name = _tool_name(payload)
        if isinstance(call_id, str):
            state.calls[call_id] = {
                "tool_call": {"name": name, "status": payload.get("status")},
                "raw": {"line_index": index},
            }
        entries.append(
            Entry(
                number,
                "tool_call",
                timestamp,
                name=name,
                arguments=arguments if parsed is None else parsed,
            )
        )
        return "tool_call"
    if item in TOOL_OUTPUT_TYPES:
        call_id = payload.get("call_id")
        call = state.calls.get(call_id) if isinstance(call_id, str) else None
        _input(state, timestamp)
        if call is None:
            state.result.problems.append(
                Problem(
                    state.result.file_path,
                    number,
                    f"tool output for call_id {call_id!r} with no call before it",
                )
            )
            return "tool_result"
        output = payload.get("output")
        text, failed = _output_text(output)
        entries.append(
            Entry(
                number,
                "tool_result",
                timestamp,
                text,
                call_line=call["raw"]["line_index"] + 1,
                is_error=failed,
            )
        )
        return "tool_result"
    event_type = "legacy" if legacy else "response_item"
    state.result.problems.append(
        Problem(
            state.result.file_path,
            number,
            f"unknown {event_type} type {described(payload.get('type'))}; kept as meta",
        )
    )
    return "meta"


def _plain_text(content: Any) -> str:
    """A message's text as written (images as [image]), for the event log."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content if type(content) is list else ():
        if type(part) is not dict:
            continue
        text = part.get("text")
        if type(text) is str:
            parts.append(text)
        elif "image" in str(part.get("type")):
            parts.append("[image]")
    return "\n\n".join(parts)


def _output_text(output: Any) -> tuple[str, bool]:
    """A tool output as text, and whether it reports a failure (Codex wraps shell output
    as {"output", "metadata": {"exit_code"}}; older versions say {"success": false})."""
    if type(output) is not str:
        if output is None:
            return "", False
        output = orjson.dumps(output).decode()
    failed = False
    if output.startswith("{") and ('"exit_code"' in output or '"success"' in output):
        parsed = json_of(output)
        if type(parsed) is dict:
            meta = parsed.get("metadata")
            code = meta.get("exit_code") if type(meta) is dict else None
            failed = parsed.get("success") is False or (type(code) is int and code != 0)
    return output, failed
