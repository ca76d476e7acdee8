"""Claude Code sessions (`~/.claude/projects/<project>/<session>.jsonl`) → NormalizedMessage.

Every line is a JSON object with a `type`:

- `user` and `assistant`: `message` is the API message (`role`, `content` as a string
  or a list of blocks); `uuid` and `parentUuid` chain the lines into a tree (a retry or
  an edited prompt branches it; `isSidechain` marks a subagent's conversation);
  assistant lines carry `message.id`, `message.model` and `message.usage`; Claude Code
  writes one line per content block of a response, each repeating the message id and
  its usage;
- `summary` (a title for the conversation, with the `leafUuid` it summarises),
  `system` (notes such as compaction boundaries), `file-history-snapshot`,
  `queue-operation`, `progress` and `custom-title`: kept as meta. A line of any other
  type is reported and kept as meta with only its SHA-256 (`raw.payload_sha256`), not
  its text (it need not be a transcript's).

Normalization (seed 003, as for Codex): a line becomes one NormalizedMessage per content
block, ids `timestamp#line` for its first block and `timestamp#line.N` for block N > 0;
text → a user or assistant message segment; `thinking` → reasoning (meta, its text as
a system segment, the signature only as a SHA-256); `redacted_thinking` → reasoning kept
in `raw.encrypted_content` and shown as its SHA-256; `tool_use` → tool_call with the
input as `arguments_json`; `tool_result` → tool_result joined to its call by
`tool_use_id`; `image` → an image segment with its data URI. Text Claude Code inserts
on the user's side (command output, system reminders, `isMeta` lines, compaction
summaries) is `system`, not something the user said.

Token usage is counted once per message id (the last line of a message has its final
output count); `input_tokens` is input + cache writes + cache reads, as everywhere in
OpenCrab, so cached tokens are never counted twice.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from opencrab.importers.common import (
    Entry,
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
    text_segments,
    unread,
    unread_payload,
    unreadable,
)

__all__ = ["find_sessions", "parse_file", "parse_lines", "scan_lines"]

KNOWN_META_TYPES = {
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "custom-title",
}
INJECTED_PREFIXES = (
    ("<command-name>", "command"),
    ("<command-message>", "command"),
    ("<local-command-stdout>", "command_output"),
    ("<local-command-stderr>", "command_output"),
    ("<system-reminder>", "system_reminder"),
    ("<user-prompt-submit-hook>", "hook"),
    ("caveat: the messages below were generated", "caveat"),
)
TITLE_CHARS = 200
LINE_KEYS = ("uuid", "parentUuid", "isSidechain", "sessionId", "requestId", "agentId")


def find_sessions(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[Problem]]:
    """`*.jsonl` session files under the paths (files are taken as given)."""
    return find_files(paths, "*.jsonl", (".jsonl",))


@dataclass
class _Pending:
    """The usage of the assistant message being read (counted when it ends)."""

    message_id: str
    model: str | None
    usage: dict[str, Any]
    line: int
    timestamp: str
    started: str | None
    replayed: bool  # read from lines imported before: counted then


class _State:
    def __init__(self, result: Transcript, *, scan: bool) -> None:
        self.result = result
        self.scan = scan
        self.calls: dict[str, tuple[int, int, str]] = {}  # tool_use id -> (line, part, name)
        self.anchors: dict[str, tuple[int, int]] = {}  # line uuid -> its last event
        self.counted: set[str] = set()  # message ids whose usage is counted
        self.pending: _Pending | None = None
        self.input_at: str | None = None
        self.last_timestamp: str | None = None
        self.fallback = ""

    def set_mtime(self, mtime: float | None) -> None:
        moment = datetime.fromtimestamp(mtime or 0, UTC)
        self.fallback = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_file(path: Path, *, skip_lines: int = 0) -> Transcript:
    """Parse a session file; `skip_lines` lines at the start were imported before."""
    return parse_path(parse_lines, path, skip_lines)


def parse_lines(
    lines: Iterable[bytes],
    file_path: str,
    *,
    skip_lines: int = 0,
    mtime: float | None = None,
) -> Transcript:
    """Every line as NormalizedMessages (one per content block), problems reported."""
    return _read(lines, file_path, skip_lines, mtime, scan=False)


def scan_lines(
    lines: Iterable[bytes],
    file_path: str,
    *,
    skip_lines: int = 0,
    mtime: float | None = None,
) -> Transcript:
    """What an import needs: counts by source_type, problems, usage and the entries
    that become AgentEvents, without building NormalizedMessages."""
    return _read(lines, file_path, skip_lines, mtime, scan=True)


def _read(
    lines: Iterable[bytes], file_path: str, skip_lines: int, mtime: float | None, *, scan: bool
) -> Transcript:
    result = Transcript(file_path=file_path, source="claude", provider="anthropic")
    state = _State(result, scan=scan)
    state.set_mtime(mtime)
    for index, event in json_lines(lines, result, skip_lines):
        replay = index < skip_lines
        emitted = sum(result.kinds.values())
        try:
            _line(state, event, index, replay=replay)
        except Exception as exc:  # a shape no rule foresaw: reported, the file goes on
            if not replay:
                unreadable(result, index, exc)
                _emit(
                    state,
                    state.last_timestamp or state.fallback,
                    index,
                    sum(result.kinds.values()) - emitted,  # after the blocks it did emit
                    role="meta",
                    source_type="meta",
                    event_type="unreadable",
                    metadata={"event_kind": "unknown"},
                    raw_extra=unread_payload(event),
                )
    _flush_usage(state, replay=False)
    result.ended_at = state.last_timestamp
    return result


# ------------------------------------------------------------------ one line
def _line(state: _State, event: dict[str, Any], index: int, *, replay: bool) -> None:
    result = state.result
    number = index + 1
    kind = name_of(event.get("type"))
    timestamp = event.get("timestamp")
    if not isinstance(timestamp, str) or not timestamp:
        # the line before's, or (seed 003's last resort) the file's mtime
        timestamp = state.last_timestamp or state.fallback
    else:
        state.last_timestamp = timestamp
        if result.started_at is None:
            result.started_at = timestamp
    if isinstance(event.get("sessionId"), str) and result.session_id is None:
        result.session_id = event["sessionId"]
        for key in ("cwd", "gitBranch", "version"):
            if key in event:
                result.header[key] = event[key]
    message = event.get("message")
    if kind in ("user", "assistant") and type(message) is dict:
        _conversation(state, event, message, str(kind), timestamp, index, replay=replay)
        return
    if replay:
        if kind == "summary" and isinstance(event.get("summary"), str):
            result.title = event["summary"][:TITLE_CHARS]
        return
    if kind == "summary":
        summary = event.get("summary")
        if isinstance(summary, str) and summary:
            result.title = " ".join(summary.split())[:TITLE_CHARS]
        _emit(
            state,
            timestamp,
            index,
            0,
            role="meta",
            source_type="session",
            event_type="summary",
            metadata={"summary": summary, "leafUuid": event.get("leafUuid")},
        )
        return
    if kind in KNOWN_META_TYPES:
        content = event.get("content")
        metadata: dict[str, Any] = {"event_kind": event.get("subtype") or kind}
        metadata.update({k: event[k] for k in LINE_KEYS if k in event})
        if kind == "system" and isinstance(event.get("level"), str):
            metadata["level"] = event["level"]
        _emit(
            state,
            timestamp,
            index,
            0,
            role="meta",
            source_type="meta",
            event_type=str(kind),
            segments=text_segments(content, "system", str(kind)) if not state.scan else None,
            metadata=metadata,
        )
        _anchor(state, event, None)
        return
    what = kind or ("no type" if event.get("type") is None else described(event["type"]))
    if kind in ("user", "assistant"):
        what = f"{kind} without a message object"
    problem = f"unknown line ({what}); kept as meta"
    result.problems.append(Problem(result.file_path, number, problem))
    unread(result, index, event)  # stored as its SHA-256, not its text
    _emit(
        state,
        timestamp,
        index,
        0,
        role="meta",
        source_type="meta",
        event_type=str(kind) if kind is not None else "unknown",
        metadata={"event_kind": "unknown"},
        raw_extra=unread_payload(event),
    )


def _conversation(
    state: _State,
    event: dict[str, Any],
    message: dict[str, Any],
    kind: str,
    timestamp: str,
    index: int,
    *,
    replay: bool,
) -> None:
    result = state.result
    number = index + 1
    content = message.get("content")
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    )
    if type(blocks) is not list:
        blocks = []
    line_meta: dict[str, Any] = {k: event[k] for k in LINE_KEYS if k in event}
    if kind == "assistant":
        message_id = message.get("id")
        if isinstance(message_id, str):
            line_meta["message_id"] = message_id
        if isinstance(message.get("model"), str):
            line_meta["model"] = message["model"]
        _usage(state, message, timestamp, number, replay=replay)
    else:
        _flush_usage(state, replay=replay)
    injected = _injected(event, blocks) if kind == "user" else None
    if injected:
        line_meta["injected"] = injected
    parent = state.anchors.get(name_of(event.get("parentUuid")) or "")
    last: tuple[int, int] | None = None
    if not blocks and not replay:
        # an empty message still accounts for its line
        _emit(
            state,
            timestamp,
            index,
            0,
            role="system" if injected else kind,
            source_type="message",
            event_type=kind,
            payload_type="empty",
            metadata=line_meta,
        )
    for part, block in enumerate(blocks):
        if type(block) is not dict:
            block = {"type": "text", "text": str(block)}
        produced = _block(
            state,
            block,
            kind,
            timestamp,
            index,
            part,
            line_meta,
            injected,
            parent if last is None else last,
            replay=replay,
        )
        if produced:
            last = (number, part)
    _anchor(state, event, last)
    if kind == "user" and not injected:
        if result.title is None and not replay:
            text = " ".join(
                b["text"] for b in blocks if type(b) is dict and isinstance(b.get("text"), str)
            )
            result.title = " ".join(text.split())[:TITLE_CHARS] or None
        if any(type(b) is dict and b.get("type") == "text" for b in blocks):
            state.input_at = timestamp
    if kind == "user" and any(type(b) is dict and b.get("type") == "tool_result" for b in blocks):
        state.input_at = timestamp


def _block(
    state: _State,
    block: dict[str, Any],
    kind: str,
    timestamp: str,
    index: int,
    part: int,
    line_meta: dict[str, Any],
    injected: str | None,
    parent: tuple[int, int] | None,
    *,
    replay: bool,
) -> bool:
    """One content block: a NormalizedMessage (or its count and entry, when scanning).
    True when it became an event (the next block of the chain hangs off it)."""
    result = state.result
    number = index + 1
    btype = block.get("type")
    scan = state.scan
    entries = result.entries
    if btype == "tool_use":
        call_id = block.get("id")
        name = block.get("name") if isinstance(block.get("name"), str) else "tool"
        arguments = block.get("input")
        if isinstance(call_id, str):
            state.calls[call_id] = (number, part, str(name))
        if replay:
            return True
        if scan:
            result.count("tool_call")
            entries.append(
                Entry(
                    number,
                    "tool_call",
                    timestamp,
                    name=str(name),
                    arguments=arguments,
                    part=part,
                    parent=parent,
                )
            )
            return True
        _emit(
            state,
            timestamp,
            index,
            part,
            role="tool",
            source_type="tool_call",
            event_type=kind,
            payload_type="tool_use",
            tool_call={
                "call_id": call_id,
                "name": name,
                "status": None,
                "arguments": arguments,
                "arguments_json": json_of(arguments),
            },
            metadata=line_meta,
        )
        return True
    if btype == "tool_result":
        call_id = block.get("tool_use_id")
        call = state.calls.get(call_id) if isinstance(call_id, str) else None
        if replay:
            return call is not None
        output = block.get("content")
        output_text = _result_text(output)
        failed = block.get("is_error") is True
        if call is None:
            result.problems.append(
                Problem(
                    result.file_path,
                    number,
                    f"tool_result for tool_use_id {call_id!r} with no tool_use before it",
                )
            )
        if scan:
            result.count("tool_result")
            if call is not None:
                entries.append(
                    Entry(
                        number,
                        "tool_result",
                        timestamp,
                        output_text,
                        call_line=call[0],
                        call_part=call[1],
                        is_error=failed,
                        part=part,
                        parent=parent,
                    )
                )
            return call is not None
        _emit(
            state,
            timestamp,
            index,
            part,
            role="tool",
            source_type="tool_result",
            event_type=kind,
            payload_type="tool_result",
            tool_call={
                "call_id": call_id,
                "name": None if call is None else call[2],
                "status": "error" if failed else "completed",
                "output": output,
                "output_json": json_of(output) if isinstance(output, str) else None,
            },
            segments=_result_images(output),
            metadata=line_meta,
        )
        return call is not None
    if btype in ("thinking", "redacted_thinking"):
        thinking = block.get("thinking") if btype == "thinking" else None
        if replay:
            return isinstance(thinking, str) and bool(thinking)
        if scan:
            result.count("meta")
            if isinstance(thinking, str) and thinking:
                entries.append(
                    Entry(number, "reasoning", timestamp, thinking, part=part, parent=parent)
                )
                return True
            return False
        raw_extra: dict[str, Any] = {}
        secret = block.get("data") if btype == "redacted_thinking" else block.get("signature")
        if isinstance(secret, str):
            digest = hashlib.sha256(secret.encode()).hexdigest()
            if btype == "redacted_thinking":
                raw_extra = {"encrypted_content": secret, "encrypted_sha256": digest}
            else:
                raw_extra = {"signature_sha256": digest}
        _emit(
            state,
            timestamp,
            index,
            part,
            role="assistant",
            source_type="meta",
            event_type=kind,
            payload_type=str(btype),
            segments=text_segments(thinking, "system", "thinking"),
            metadata={**line_meta, "event_kind": "reasoning"},
            raw_extra=raw_extra,
        )
        return isinstance(thinking, str) and bool(thinking)
    if btype == "image":
        if replay:
            return False
        if scan:
            result.count("message")
            return False
        url, media_type = _image(block)
        _emit(
            state,
            timestamp,
            index,
            part,
            role="system" if injected else kind,
            source_type="message",
            event_type=kind,
            payload_type="image",
            segments=[
                image_segment(
                    "input" if kind == "user" else "output",
                    "image",
                    url,
                    media_type,
                )
            ],
            metadata=line_meta,
        )
        return False
    text = block.get("text")
    if btype != "text" or not isinstance(text, str):
        if replay:
            return False
        result.problems.append(
            Problem(result.file_path, number, f"unknown content block {btype!r}; kept as meta")
        )
        if scan:
            result.count("meta")
            return False
        _emit(
            state,
            timestamp,
            index,
            part,
            role="meta",
            source_type="meta",
            event_type=kind,
            payload_type=str(btype),
            metadata={**line_meta, "event_kind": "unknown"},
            raw_extra={"payload": block},
        )
        return False
    role = "system" if injected else kind
    if replay:
        return role != "system"
    if scan:
        result.count("message")
        if role == "system":
            return False
        entries.append(
            Entry(
                number,
                "user" if kind == "user" else "assistant",
                timestamp,
                text,
                part=part,
                parent=parent,
            )
        )
        return True
    _emit(
        state,
        timestamp,
        index,
        part,
        role=role,
        source_type="message",
        event_type=kind,
        payload_type="text",
        segments=text_segments(text, "input" if kind == "user" else "output", "text"),
        metadata=line_meta,
    )
    return role != "system"


# ------------------------------------------------------------------ usage
def _usage(
    state: _State, message: dict[str, Any], timestamp: str, number: int, *, replay: bool
) -> None:
    message_id = message.get("id")
    usage = message.get("usage")
    model = message.get("model")
    pending = state.pending
    if pending is not None and pending.message_id == message_id and type(usage) is dict:
        pending.usage, pending.line, pending.timestamp = usage, number, timestamp
        return
    _flush_usage(state, replay=replay)  # another message: the one before is complete
    if not isinstance(message_id, str) or type(usage) is not dict or model == "<synthetic>":
        return  # <synthetic>: an error Claude Code wrote itself, no model call
    if message_id in state.counted:
        return  # the same message again (a resumed file repeats it): counted once
    state.pending = _Pending(
        message_id,
        model if isinstance(model, str) else None,
        usage,
        number,
        timestamp,
        state.input_at,
        replay,
    )


def _flush_usage(state: _State, *, replay: bool) -> None:
    pending = state.pending
    if pending is None:
        return
    state.pending = None
    state.counted.add(pending.message_id)
    numbers = _numbers(pending.usage)
    if numbers is None or replay or pending.replayed:
        return
    fresh, written, read, output = numbers
    result = state.result
    call = UsageCall(
        timestamp=pending.timestamp,
        line=pending.line,
        model=pending.model,
        input_tokens=fresh + written + read,
        cached_input_tokens=read,
        output_tokens=output,
        reasoning_output_tokens=0,
        total_tokens=fresh + written + read + output,
        cache_write_input_tokens=written,
        latency_ms=millis_between(pending.started, pending.timestamp),
        message_id=pending.message_id,
    )
    if pending.model:
        result.model = pending.model
    result.usage.append(call)
    total = result.total_usage or dict.fromkeys(
        ("input_tokens", "cached_input_tokens", "output_tokens", "total_tokens"), 0
    )
    total["input_tokens"] += call.input_tokens
    total["cached_input_tokens"] += read
    total["output_tokens"] += output
    total["total_tokens"] += call.total_tokens
    result.total_usage = total
    if state.scan:
        result.entries.append(Entry(pending.line, "usage", pending.timestamp, usage=call))


def _numbers(usage: dict[str, Any]) -> tuple[int, int, int, int] | None:
    values = (
        usage.get("input_tokens", 0),
        usage.get("cache_creation_input_tokens") or 0,
        usage.get("cache_read_input_tokens") or 0,
        usage.get("output_tokens", 0),
    )
    if not all(type(v) is int and v >= 0 for v in values):
        return None
    return values


# ------------------------------------------------------------------ pieces
def _anchor(state: _State, event: dict[str, Any], last: tuple[int, int] | None) -> None:
    """Where a child of this line hangs in the event log: this line's last event, or
    (when it made none) its own parent's."""
    uuid = event.get("uuid")
    if not isinstance(uuid, str):
        return
    anchor = last or state.anchors.get(name_of(event.get("parentUuid")) or "")
    if anchor is not None:
        state.anchors[uuid] = anchor


def _injected(event: dict[str, Any], blocks: list[Any]) -> str | None:
    """What Claude Code put on the user's side, or None when the user wrote it."""
    if event.get("isMeta") is True:
        return "meta"
    if event.get("isCompactSummary") is True:
        return "compact_summary"
    texts = [b["text"] for b in blocks if type(b) is dict and isinstance(b.get("text"), str)]
    return injected_kind(texts, INJECTED_PREFIXES)


def _result_text(output: Any) -> str:
    """A tool_result's content as text (text blocks joined; images as [image])."""
    if isinstance(output, str):
        return output
    if type(output) is list:
        parts = []
        for block in output:
            if type(block) is dict and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif type(block) is dict and block.get("type") == "image":
                parts.append("[image]")
        return "\n".join(parts)
    return "" if output is None else orjson.dumps(output).decode()


def _result_images(output: Any) -> list[dict[str, Any]]:
    segments = []
    for block in output if type(output) is list else ():
        if type(block) is dict and block.get("type") == "image":
            segments.append(image_segment("input", "image", *_image(block)))
    return segments


def _image(block: dict[str, Any]) -> tuple[Any, Any]:
    """An image block's (URL or data URI, media type)."""
    source = block.get("source")
    if type(source) is not dict:
        return None, None
    url = source.get("url")
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type') or 'image/png'};base64,{source['data']}"
    return url, source.get("media_type")


def _emit(
    state: _State, timestamp: str, index: int, part: int, *, source_type: str, **fields: Any
) -> None:
    """Count a NormalizedMessage; build and keep it unless scanning (`fields` are
    `normalized_message`'s)."""
    result = state.result
    result.count(source_type)
    if not state.scan:
        result.messages.append(
            normalized_message(
                result.file_path, timestamp, index, part, source_type=source_type, **fields
            )
        )
