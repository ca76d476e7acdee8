"""Gemini CLI's chat recordings: the tokens of each model call, as LLM usage metrics.

Gemini CLI records a session under `~/.gemini/tmp/<project>/chats/`: `session-*.jsonl`
(0.2x on; a sub-agent's as `<parent id>/<id>.jsonl`), or one `session-*.json` object in
older versions. A `.jsonl` line is the session's metadata, a message, `{"$set": …}`
(metadata, or the whole message list) or `{"$rewindTo": id}`; a message is written again
each time it changes (its tokens, then its tool calls), so the last line of an id holds
it. A model reply (`"type": "gemini"`) carries `model` and
`tokens: {input, output, cached, thoughts, tool, total}` (the Gemini API's prompt,
candidates, cached-content, thoughts and tool-use-prompt counts).

Only the usage is imported: the normalized transcript vocabulary (seed 003's source
types) describes Codex's rollouts and has no Gemini source, so these chats are not import
sessions and do not appear among the transcripts. Each model reply with tokens becomes
one `llm_usage_metrics` row, purpose `import`, task type `gemini`, provider `google`,
its cost from the pricing table; its id is derived from the file and the message id, so
reading the file again (it grows while the CLI runs) adds only the replies not stored
yet. Replies a rewind removed later still count: their tokens were spent.

In OpenCrab's Usage convention input includes cached and tool-use-prompt tokens and
output includes thoughts. A line or message that cannot be read (not JSON, a count that
is not a whole number from 0 to 2^31-1, tokens without input or output) is a Problem
naming the file and line; the rest of the file is still imported.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid5

import orjson

from opencrab.importers.common import (
    OVERLONG_MARK,
    FileTooLarge,
    Problem,
    ReadLimits,
    UsageCall,
    UsageImport,
    find_files,
    import_usage_of,
    parse_time,
    read_lines,
    shown,
    text_or_none,
)
from opencrab.importers.rows import I32
from opencrab.importers.store import (
    MODEL_CHARS,
    NAMESPACE,
    session_id_for,
)
from opencrab.llm.metrics import CallRecord
from opencrab.llm.pricing import PriceBook
from opencrab.llm.types import Usage
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.types import utcnow

SOURCE = "gemini"
PROVIDER = "google"  # the Gemini API; the chats do not name a provider
COUNTS = ("input", "output", "cached", "thoughts", "tool")
REQUIRED = ("input", "output")


@dataclass
class ChatUsage:
    """The model calls one chat file records (by message id, in file order) and its
    problems."""

    path: Path
    calls: dict[str, UsageCall] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def find_chats(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[Problem]]:
    """Chat files under the paths: `*.jsonl` and `*.json` in a `chats` folder or named
    `session-*` (files are taken as given, if they are so)."""
    found, problems = find_files(paths, "*.json*", (".jsonl", ".json"))
    chats = [p for p in found if "chats" in p.parts[:-1] or p.name.startswith("session-")]
    return chats, problems


def read_chat(path: Path, limits: ReadLimits | None = None) -> ChatUsage:
    """The model calls a chat file records, read line by line; a file over `limits` or
    that cannot be read is one Problem and gives no call."""
    chat = ChatUsage(path)
    try:
        lines = read_lines(path, limits)
        if path.suffix == ".json":  # one JSON document (older versions)
            lines = iter([b"".join(lines)])
        _read(chat, lines)
    except FileTooLarge as exc:
        chat.calls.clear()
        chat.problems = [Problem(str(path), 0, str(exc))]
    except OSError as exc:
        chat.calls.clear()
        chat.problems = [Problem(str(path), 0, f"not read: {exc.strerror or exc}")]
    return chat


def _read(chat: ChatUsage, lines: Iterator[bytes]) -> None:
    last_input: datetime | None = None
    for number, raw in enumerate(lines, start=1):
        record = _record(chat, number, raw)
        if record is None:
            continue
        for message in _messages(record):
            if not isinstance(message, dict):
                chat.problems.append(Problem(str(chat.path), number, "a message is not an object"))
            elif message.get("type") == "user":
                last_input = parse_time(text_or_none(message.get("timestamp"))) or last_input
            elif message.get("type") == "gemini":
                _call(chat, number, message, last_input)


def _record(chat: ChatUsage, number: int, raw: bytes) -> dict[str, Any] | None:
    if raw.startswith(OVERLONG_MARK):
        chat.problems.append(Problem(str(chat.path), number, "an over-long line, skipped"))
        return None
    if not raw.strip():
        return None
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        chat.problems.append(Problem(str(chat.path), number, f"not JSON: {exc}"))
        return None
    if not isinstance(record, dict):
        chat.problems.append(Problem(str(chat.path), number, "not a JSON object"))
        return None
    return record


def _messages(record: dict[str, Any]) -> list[Any]:
    """The messages a record holds: itself, a `$set` of the message list, or the list of
    a metadata record (an older version's whole file)."""
    if "$rewindTo" in record:
        return []
    holder = record.get("$set", record)
    if not isinstance(holder, dict):
        return []
    if "type" in holder:  # a message (one without an id is reported)
        return [holder]
    messages = holder.get("messages")
    return messages if isinstance(messages, list) else []


def _call(chat: ChatUsage, number: int, message: dict[str, Any], since: datetime | None) -> None:
    """Record a model reply's call, or a Problem when its tokens cannot be read."""
    message_id = message.get("id")
    found = _usage(message, since)
    if isinstance(found, str):
        where = f"model message {message_id!r}" if text_or_none(message_id) else "a model message"
        chat.problems.append(Problem(str(chat.path), number, f"{where}: {found}"))
    elif found is not None:
        found.line = number
        chat.calls[str(message_id)] = found


def _usage(message: dict[str, Any], since: datetime | None) -> UsageCall | str | None:
    """A reply's call; why it cannot be read; None before its tokens are recorded (a
    later line of the same id holds them)."""
    tokens = message.get("tokens")
    if tokens is None:
        return None
    message_id = text_or_none(message.get("id"))
    if message_id is None:
        return "has no id, so its tokens are not counted"
    if not isinstance(tokens, dict):
        return f"tokens is {type(tokens).__name__}, not an object"
    missing = [name for name in REQUIRED if name not in tokens]
    if missing:
        return f"tokens without {' or '.join(missing)}"
    counts: dict[str, int] = {}
    for name in COUNTS:
        value = tokens.get(name, 0)
        if type(value) is not int or not 0 <= value <= I32:
            return f"tokens.{name} = {shown(value)} is not a token count"
        counts[name] = value
    input_tokens = counts["input"] + counts["tool"]
    output_tokens = counts["output"] + counts["thoughts"]
    if input_tokens + output_tokens > I32:
        return f"{input_tokens + output_tokens} tokens in one call is not a count"
    stamp = text_or_none(message.get("timestamp")) or ""
    at = parse_time(stamp)
    latency = None
    if at is not None and since is not None and at >= since:
        latency = min(int((at - since).total_seconds() * 1000), I32)
    model = text_or_none(message.get("model"))
    return UsageCall(
        timestamp=stamp,
        line=0,
        model=model[:MODEL_CHARS] if model else None,
        input_tokens=input_tokens,
        cached_input_tokens=min(counts["cached"], input_tokens),
        output_tokens=output_tokens,
        reasoning_output_tokens=counts["thoughts"],
        total_tokens=input_tokens + output_tokens,
        latency_ms=latency,
        message_id=message_id,
    )


# ------------------------------------------------------------------ storing
def import_usage(
    db: Database,
    paths: Iterable[str | os.PathLike[str]],
    *,
    agent_id: str | None,
    prices: PriceBook | None = None,
    limits: ReadLimits | None = None,
) -> UsageImport:
    """Store the calls of every chat file under `paths` not stored yet, under `agent_id`
    (the "system" agent when None); one transaction per file."""
    return import_usage_of(
        db,
        find_chats(paths),
        lambda path: read_chat(path, limits),
        lambda chat, book: _rows(chat, agent_id or "system", book),
        prices,
    )


def _rows(chat: ChatUsage, agent_id: str, prices: PriceBook) -> Iterator[metrics_repo.MetricRow]:
    session_id = session_id_for(SOURCE, chat.path.expanduser().resolve())
    try:
        fallback = datetime.fromtimestamp(chat.path.stat().st_mtime, UTC)
    except (OSError, OverflowError, ValueError):
        fallback = utcnow()
    for message_id, call in chat.calls.items():
        model = call.model or "unknown"
        usage = Usage(
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            total_tokens=call.total_tokens,
            cache_read_tokens=call.cached_input_tokens,
            reasoning_tokens=call.reasoning_output_tokens,
        )
        cost, cost_source = prices.cost(PROVIDER, model, usage)
        at = parse_time(call.timestamp) or fallback
        record = CallRecord(
            id=str(uuid5(NAMESPACE, f"{session_id}:{message_id}")),
            provider=PROVIDER,
            model=model,
            purpose="import",
            agent_id=agent_id,
            session_id=session_id,
            task_type=SOURCE,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            total_tokens=call.total_tokens,
            cache_read_tokens=call.cached_input_tokens,
            reasoning_tokens=call.reasoning_output_tokens,
            estimated_cost_usd=cost,
            cost_source=cost_source,
            latency_ms=call.latency_ms or 0,
            timestamp=at,
        )
        # one encoder of a call's row (CallRecord.as_row); stored now, as before
        yield record.as_row()._replace(created_at=utcnow())
