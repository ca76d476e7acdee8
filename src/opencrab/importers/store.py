"""Importing transcripts: files → import tables, the event log, memory and LLM metrics.

Each file is one import session, keyed by (source, resolved path); its id is also the
trace id of its AgentEvents. An import reads only what is new:

- a file whose size and mtime are as recorded is not opened again;
- otherwise the lines already imported are read again only to check that they are
  unchanged (SHA-256 of the bytes imported) and to rebuild the parser's state, and the
  lines after them are imported; a file that changed other than by growing is reported
  and left as imported;
- a last line cut off mid-write is reported and read again next time.

What one file's new lines write, in one transaction (`Importer.run` writes several files'
new lines in one, BATCH_BYTES at a time; a file is never split):

- `import_chunks`: the lines as read (zstd), so `GET …/messages` can normalize them
  again whenever asked, with every field of seed 003, even after the file is gone; a
  line that is no transcript's (not JSON, not an object, a type no rule reads) is stored
  as its SHA-256 and what its meta message needs, never its text (`common.unread`);
- `import_problems`: each line that could not be normalized as it is, and why;
- the event log: user, reasoning, tool_call, tool_result (naming its call), message and
  token_usage sidecars, chained by parent_id; ids are derived from the session and line,
  so an event is never written twice; each payload is validated as its seed-000 type and
  encoded by `event_log.event_row`, as every other writer's events are;
- the chosen agent's memory: the same turns as session log lines (speech, inner_voice,
  action), searchable with the rest of its memory;
- `llm_usage_metrics`: one row per model call the file records, purpose `import`, with
  provider and model from the file and cost from the pricing table; latency is the time
  from the call's input to the line that recorded its tokens. Each row is a `CallRecord`
  encoded by `as_row`, as the turn recorder's and the router's calls are.
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import zstandard
from sqlalchemy.engine import Connection

from opencrab.core.work_spans import work_span
from opencrab.errors import ValidationError
from opencrab.event_log import EventRow, event_row
from opencrab.events import (
    MessagePayload,
    Payload,
    ReasoningPayload,
    TokenUsagePayload,
    ToolCallPayload,
    ToolResultPayload,
    UserPayload,
)
from opencrab.importers import claude, codex, codex_scan
from opencrab.importers.common import (
    Entry,
    FileTooLarge,
    Problem,
    ReadLimits,
    Transcript,
    file_size,
    parse_time,
    read_lines,
)
from opencrab.importers.results import FileResult, ImportSummary
from opencrab.importers.roots import ImportRoots
from opencrab.importers.rows import Clock, clip, compact, count, header_kept, project
from opencrab.llm.metrics import SYSTEM_AGENT, CallRecord
from opencrab.llm.pricing import CostSource, ModelPrice, PriceBook
from opencrab.llm.types import Usage
from opencrab.store import Database
from opencrab.store.bulk import paused_gc
from opencrab.store.repositories import events as events_repo
from opencrab.store.repositories import imports as imports_repo
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories.imports import ImportSession
from opencrab.store.repositories.memory import append_log_rows
from opencrab.store.repositories.metrics import MetricRow
from opencrab.store.types import utcnow

NAMESPACE = uuid5(NAMESPACE_URL, "https://opencrab.dev/imports")
USAGE_PART = 255  # the part number of a line's token_usage event and metrics row
MODEL_CHARS = 200  # a model or provider name a file gives is clipped to what the columns
PROVIDER_CHARS = 64  # hold (PostgreSQL refuses longer text; SQLite would keep it)
_ZSTD_LEVEL = 3
BATCH_BYTES = 16 * 1024 * 1024
"""New lines written per transaction by `Importer.run` (a file is never split)."""
LOOKUP_FILES = 64
"""Files whose stored sessions `Importer.run` looks up in one query, just before reading them."""

Scan = Callable[..., Transcript]
Row = tuple[Any, ...]

# each line's payload is validated as its seed-000 type (pydantic-core's validator is
# several times faster than model_construct) and encoded by event_log.event_row
_USER = UserPayload.__pydantic_validator__.validate_python
_REASONING = ReasoningPayload.__pydantic_validator__.validate_python
_MESSAGE = MessagePayload.__pydantic_validator__.validate_python
_TOOL_CALL = ToolCallPayload.__pydantic_validator__.validate_python
_TOOL_RESULT = ToolResultPayload.__pydantic_validator__.validate_python
_TOKEN_USAGE = TokenUsagePayload.__pydantic_validator__.validate_python


@dataclass(frozen=True)
class Source:
    """A transcript format: how to find its files, scan them for an import, and
    normalize their lines for reading."""

    name: str
    find: Callable[[Iterable[str | os.PathLike[str]]], tuple[list[Path], list[Problem]]]
    scan: Scan
    parse: Scan
    provider: str  # when the file does not say


SOURCES = {
    "codex": Source(
        "codex", codex.find_rollouts, codex_scan.scan_lines, codex.parse_lines, "openai"
    ),
    "claude": Source(
        "claude", claude.find_sessions, claude.scan_lines, claude.parse_lines, "anthropic"
    ),
}
"""The formats `opencrab import` reads, by name."""


def session_id_for(source: str, path: Path) -> str:
    """The import session id (and trace id) of a file: stable for its resolved path."""
    return str(uuid5(NAMESPACE, f"{source}:{path}"))


def event_id(session_id: str, line: int, part: int = 0) -> str:
    """The id of a line's event: the session id with the line and part in its last 48
    bits (version and variant stay those of the session id)."""
    return f"{session_id[:24]}{line * 256 + part:012x}"


# ------------------------------------------------------------------ reading a file
class _Reader:
    """The file's lines, hashing them and keeping those past `skip` (the new ones).

    The lines imported before are read one at a time (they are not kept); the new lines
    are taken in one go and hashed in one call when `digest` knows how many are kept.
    """

    def __init__(self, path: Path, skip: int, check_bytes: int, limits: ReadLimits) -> None:
        self.path = path
        self.limits = limits
        self.skip = skip
        self.check_bytes = check_bytes
        self.hash = hashlib.sha256()
        self.read = 0
        self.prefix_digest: str | None = None if check_bytes else hashlib.sha256().hexdigest()
        self.new: list[bytes] = []
        self._held: bytes | None = None  # the last line is hashed once known to be kept
        self._rest: list[bytes] = []  # the new lines read in one go, not hashed yet

    def __iter__(self) -> Iterator[bytes]:
        lines = read_lines(self.path, self.limits)
        index = 0
        # the lines imported before, up to the end of the recorded prefix: one by one
        while index < self.skip or self.prefix_digest is None:
            raw = next(lines, None)
            if raw is None:
                return
            if self._held is not None:
                self.hash.update(self._held)
            self._check(raw)
            self._held = raw
            self.read += len(raw)
            if index >= self.skip:
                self.new.append(raw)
            index += 1
            yield raw
        rest = self._rest = list(lines)
        self.new += rest
        self.read += sum(map(len, rest))
        yield from rest

    def _check(self, raw: bytes) -> None:
        if self.prefix_digest is not None or self.read + len(raw) < self.check_bytes:
            return
        # the recorded prefix ends in this line (a last line without its newline then)
        head = self.hash.copy()
        head.update(raw[: self.check_bytes - self.read])
        self.prefix_digest = head.hexdigest()

    def digest(self, consumed_bytes: int) -> str:
        """SHA-256 of the first `consumed_bytes` bytes (all, or all but the last line)."""
        tail = b"".join([self._held or b"", *self._rest])
        hashed = self.read - len(tail)
        self.hash.update(memoryview(tail)[: consumed_bytes - hashed])
        self._held, self._rest = None, []
        return self.hash.hexdigest()


# ------------------------------------------------------------------ the importer
class Importer:
    """Import transcripts of one format for one agent (or none).

    Example:
        summary = Importer(db, "codex", agent_id=agent.id).run(["~/.codex/sessions"])
        summary.as_json()["messages_by_source_type"]
    """

    def __init__(
        self,
        db: Database,
        source: str,
        *,
        agent_id: str | None = None,
        prices: PriceBook | None = None,
        limits: ReadLimits | None = None,
        roots: ImportRoots | None = None,
    ) -> None:
        known = SOURCES
        if source not in known:
            raise ValidationError(f"unknown transcript source {source!r}: use {', '.join(known)}")
        self.db = db
        self.source = known[source]
        self.agent_id = agent_id
        if prices is None:
            with db.read() as conn:
                prices = PriceBook.load(conn)
        self.prices = prices
        self.limits = limits or ReadLimits()  # what one file may give ([imports])
        self.roots = roots  # where files may be read from (the API's [imports] roots)
        self._compress = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
        self._prices: dict[tuple[str, str], ModelPrice | None] = {}

    def cost(self, provider: str, model: str, usage: Usage) -> tuple[float, CostSource]:
        """A call's cost from the pricing table (each model looked up once)."""
        key = (provider, model)
        if key not in self._prices:
            self._prices[key] = self.prices.find(provider, model)
        price = self._prices[key]
        if price is None:
            return 0.0, "unknown"
        return price.cost(usage), "pricing"

    def find(self, paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[Problem]]:
        """The files `run` would import, and the paths that do not exist."""
        return self.source.find(paths)

    def run(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        progress: Callable[[FileResult, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> ImportSummary:
        """Import every file under `paths`; `progress(result, file size)` after each is
        stored. Files are written BATCH_BYTES of new lines per transaction (each file
        whole in one), so many small files cost few commits. When `stop()` turns true
        the files read so far are stored and the rest are left (`summary.files` holds
        those done). The import is a span of telemetry when that is exported."""
        with work_span("import", self.source.name, agent_id=self.agent_id or "") as span:
            summary = self._run(paths, progress, stop)
            span.set("opencrab.import.files", len(summary.files))
            span.set("opencrab.import.messages", sum(f.messages for f in summary.files))
        return summary

    def _run(
        self,
        paths: Iterable[str | os.PathLike[str]],
        progress: Callable[[FileResult, int], None] | None,
        stop: Callable[[], bool] | None,
    ) -> ImportSummary:
        files, problems = self.find(paths)
        summary = ImportSummary(self.source.name, self.agent_id, problems=problems)
        batch: list[_Pending] = []
        told: list[tuple[FileResult, Path]] = []  # results whose progress is not yet told
        pending_bytes = 0

        def flush() -> None:
            nonlocal pending_bytes
            if batch:
                self._write(batch)
                batch.clear()
                pending_bytes = 0
                gc.collect(0)  # what cycles the batch left (few): young objects only
            if progress is not None:
                for done, where in told:
                    progress(done, file_size(where))
            told.clear()

        ids = [session_id_for(self.source.name, path.expanduser().resolve()) for path in files]
        stored: dict[str, ImportSession | None] = {}  # looked up, not yet prepared

        def look_up(start: int) -> None:
            """The stored sessions of the next LOOKUP_FILES files not looked up (one query)."""
            wanted = list(dict.fromkeys(i for i in ids[start:] if i not in stored))
            wanted = wanted[:LOOKUP_FILES]
            with self.db.read() as conn:
                found = imports_repo.get_many(conn, wanted)
            stored.update((i, found.get(i)) for i in wanted)

        # the cyclic collector stays off: it would rescan the batch's many objects again
        # and again; they are freed by reference counting when the batch is written
        with paused_gc():
            for index, path in enumerate(files):
                if stop is not None and stop():
                    break
                session_id = ids[index]
                if any(p.write.session_id == session_id for p in batch):
                    flush()  # the same file again (by another path): it reads what was stored
                if session_id not in stored:
                    look_up(index)
                # a session looked up is used once: the same file again reads it anew
                prepared = self._prepare(path, stored.pop(session_id))
                if isinstance(prepared, _Pending):
                    batch.append(prepared)
                    pending_bytes += prepared.new_bytes
                    result = prepared.write.result
                else:
                    result = prepared
                summary.files.append(result)
                told.append((result, path))
                if pending_bytes >= BATCH_BYTES or not batch:
                    flush()
            flush()
        return summary

    def file(self, path: Path) -> FileResult:
        """Import one file's new lines."""
        with self.db.read() as conn:
            row = imports_repo.get(
                conn, session_id_for(self.source.name, path.expanduser().resolve())
            )
        prepared = self._prepare(path, row)
        if isinstance(prepared, FileResult):
            return prepared
        self._write([prepared])
        return prepared.write.result

    def _write(self, batch: Sequence[_Pending]) -> None:
        """Store prepared files in one transaction."""
        with paused_gc(), self.db.write() as conn:
            for pending in batch:
                pending.write(conn, **pending.where)

    def _prepare(self, path: Path, row: ImportSession | None) -> FileResult | _Pending:
        """Read a file's new lines given its stored session `row` (None when new): what
        storing them takes, or the result when there is nothing to store (unchanged,
        changed, unreadable)."""
        given = path
        path = path.expanduser().resolve()
        session_id = session_id_for(self.source.name, path)
        if self.roots is not None and not self.roots.holds(path):
            # named as found (where it leads is not told): a symlink out of the roots
            reason = f"leads outside the import roots ({self.roots.described()}); not imported"
            return FileResult(
                str(given), session_id, "failed", problems=[Problem(str(given), 0, reason)]
            )
        try:
            stat = path.stat()
        except OSError as exc:
            return FileResult(
                str(path),
                session_id,
                "failed",
                problems=[Problem(str(path), 0, f"cannot read: {exc.strerror or exc}")],
            )
        if row is not None and row.file_size == stat.st_size and row.file_mtime == stat.st_mtime:
            return FileResult(str(path), session_id, "unchanged")
        skip = row.lines if row is not None else 0
        reader = _Reader(path, skip, row.bytes if row is not None else 0, self.limits)
        try:
            with paused_gc():
                scanned = self.source.scan(reader, str(path), skip_lines=skip, mtime=stat.st_mtime)
        except (OSError, zstandard.ZstdError) as exc:  # unreadable, or not zstd
            return FileResult(
                str(path),
                session_id,
                "failed",
                problems=[Problem(str(path), 0, f"cannot read: {exc}")],
            )
        except FileTooLarge as exc:  # a decompression bomb, a flood of lines
            return FileResult(
                str(path), session_id, "failed", problems=[Problem(str(path), 0, str(exc))]
            )
        if row is not None and (
            reader.read < row.bytes or reader.prefix_digest != row.prefix_sha256
        ):
            return FileResult(
                str(path),
                session_id,
                "changed",
                problems=[
                    Problem(
                        str(path),
                        0,
                        "the file changed since it was imported (not only appended to); "
                        "the import is left as it was",
                    )
                ],
            )
        new_lines = scanned.consumed_lines - skip
        status = "new" if row is None else "appended" if new_lines > 0 else "unchanged"
        result = FileResult(str(path), session_id, status, lines=max(new_lines, 0))
        result.kinds = scanned.kinds
        result.messages = sum(scanned.kinds.values())
        result.problems = scanned.problems
        write = _Writer(self, session_id, scanned, row, result)
        chunk = reader.new[: max(new_lines, 0)]
        for index, stand_in in scanned.unread.items():  # no transcript's: not kept as read
            at = index - skip
            if 0 <= at < len(chunk):
                chunk[at] = stand_in + chunk[at][len(chunk[at].rstrip(b"\r\n")) :]
        return _Pending(
            write,
            {
                "chunk": chunk,
                "first_line": skip + 1,
                "stat": stat,
                "digest": reader.digest(scanned.consumed_bytes),
            },
            scanned.consumed_bytes - (row.bytes if row is not None else 0),
        )


@dataclass
class _Pending:
    """A file read and waiting to be stored: its writer and what the writer is given."""

    write: _Writer
    where: dict[str, Any]
    new_bytes: int


class _Writer:
    """The rows of one file's new lines."""

    def __init__(
        self,
        importer: Importer,
        session_id: str,
        scanned: Transcript,
        row: ImportSession | None,
        result: FileResult,
    ) -> None:
        self.importer = importer
        self.session_id = session_id
        self.scanned = scanned
        self.row = row
        self.result = result
        self.last_event = row.last_event_id if row is not None else None
        self.last_generation = row.last_generation_id if row is not None else None
        self.provider = (
            scanned.provider
            or (row.provider if row is not None and row.provider else importer.source.provider)
        )[:PROVIDER_CHARS]

    def __call__(
        self,
        conn: Connection,
        *,
        chunk: Sequence[bytes],
        first_line: int,
        stat: os.stat_result,
        digest: str,
    ) -> None:
        # memory lines and texts carry their timestamps as the driver takes them (no
        # bind processing per row): storage text on SQLite, the datetime elsewhere
        events, logs, metrics, stamps, texts = self._rows(as_text=conn.dialect.name == "sqlite")
        self._session(conn, first_line, stat, digest)
        imports_repo.add_texts(conn, texts, bound=True)
        events_repo.insert(conn, events)
        if logs:
            append_log_rows(conn, logs, bound=True)
        if metrics:
            metrics_repo.insert_bound(conn, metrics, stamps)
        if chunk:
            raw = b"".join(chunk)
            imports_repo.add_chunk(
                conn,
                self.session_id,
                first_line=first_line,
                lines=len(chunk),
                raw_bytes=len(raw),
                data=self.importer._compress.compress(raw),
            )
        self.result.events = len(events)

    def _rows(
        self, *, as_text: bool
    ) -> tuple[list[EventRow], list[Row], list[MetricRow], list[str], list[Row]]:
        """The events, memory lines, metrics rows (with each one's timestamp as storage
        text, for `metrics_repo.insert_bound`) and texts of the new lines; the memory
        lines' and texts' timestamps in the driver's form: storage text when `as_text`
        (SQLite), else the datetime.

        Each event's payload is validated as its seed-000 type and its row encoded by
        `event_log.event_row`, the one encoder of event rows (tests/importers/
        test_one_encoding compares every stored row with event_row's)."""
        importer = self.importer
        agent_id = importer.agent_id
        session_id = self.session_id
        id_head = session_id[:24]  # event_id(session_id, line, part), inline
        source = importer.source.name
        events: list[EventRow] = []
        logs: list[tuple[Any, ...]] = []
        metrics: list[MetricRow] = []
        stamps: list[str] = []
        texts: list[tuple[Any, ...]] = []
        when = Clock()
        last_event = self.last_event
        for entry in self.scanned.entries:
            moment, stamp = when(entry.timestamp)
            at = stamp if as_text else moment
            kind = entry.kind
            if kind == "usage":
                metric, usage_event = self._usage(entry, moment, stamp)
                metrics.append(metric)
                stamps.append(stamp)
                if usage_event is not None:
                    events.append(usage_event)
                continue
            line, part, text = entry.line, entry.part, entry.text
            eid = f"{id_head}{line * 256 + part:012x}"
            parent = (
                last_event
                if entry.parent is None
                else event_id(session_id, entry.parent[0], entry.parent[1])
            )
            payload: Payload
            if kind == "tool_call":
                payload = _TOOL_CALL({"name": entry.name or "tool", "arguments": entry.arguments})
                log_type, log_text = "action", clip(f"{entry.name} {compact(entry.arguments)}")
                speaker: str | None = agent_id
                self.last_generation = eid
            elif kind == "tool_result":
                assert entry.call_line is not None
                call_id = f"{id_head}{entry.call_line * 256 + entry.call_part:012x}"
                payload = _TOOL_RESULT(
                    {"output": text, "tool_call_id": UUID(call_id), "is_error": entry.is_error}
                )
                log_type, log_text, speaker = "action", clip(text), agent_id
            elif kind == "user":
                payload = _USER({"text": text})
                log_type, log_text, speaker = "speech", text, "user"
                if text:
                    texts.append((session_id, line, part, "user", at, text))
            elif kind == "reasoning":
                payload = _REASONING({"text": text})
                log_type, log_text, speaker = "inner_voice", text, agent_id
            else:
                payload = _MESSAGE({"text": text})
                log_type, log_text, speaker = "speech", text, agent_id
                if text:
                    texts.append((session_id, line, part, "assistant", at, text))
                self.last_generation = eid
            events.append(
                event_row(eid, session_id, parent, stamp, payload, {"import": source, "line": line})
            )
            last_event = eid
            if agent_id is not None and log_text:
                logs.append(
                    (agent_id, session_id, log_type, log_text, speaker, None, None, eid, at)
                )
        self.last_event = last_event
        self.result.calls = len(metrics)
        return events, logs, metrics, stamps, texts

    def _usage(
        self, entry: Entry, moment: datetime, stamp: str
    ) -> tuple[MetricRow, EventRow | None]:
        """A call's metrics row (at `moment`, encoded as the recorder encodes every call:
        `CallRecord.as_row`) and its token_usage event (stamped `stamp`, `moment` in
        storage form), if a generation came before it."""
        call = entry.usage
        assert call is not None
        importer = self.importer
        result = self.result
        result.tokens.add(call)
        model = (call.model or self.scanned.model or "unknown")[:MODEL_CHARS]
        usage = Usage(
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            total_tokens=call.total_tokens,
            cache_read_tokens=call.cached_input_tokens,
            cache_write_tokens=call.cache_write_input_tokens,
            reasoning_tokens=call.reasoning_output_tokens,
        )
        cost, cost_source = importer.cost(self.provider, model, usage)
        if cost_source == "unknown":
            result.unpriced.add(f"{self.provider}/{model}")
        result.cost_usd += cost
        uid = event_id(self.session_id, entry.line, USAGE_PART)
        metric = CallRecord(
            id=uid,
            provider=self.provider,
            model=model,
            purpose="import",
            agent_id=importer.agent_id or SYSTEM_AGENT,
            session_id=self.session_id,
            task_type=importer.source.name,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            total_tokens=call.total_tokens,
            cache_read_tokens=call.cached_input_tokens,
            cache_write_tokens=call.cache_write_input_tokens,
            reasoning_tokens=call.reasoning_output_tokens,
            estimated_cost_usd=cost,
            cost_source=cost_source,
            latency_ms=call.latency_ms or 0,
            timestamp=moment,
        ).as_row()
        if self.last_generation is None:
            return metric, None
        details = None
        if call.cached_input_tokens or call.reasoning_output_tokens:
            details = {
                "cache_read_input_tokens": count(call.cached_input_tokens) or None,
                "reasoning_output_tokens": count(call.reasoning_output_tokens) or None,
            }
        payload = _TOKEN_USAGE(
            {
                "input_tokens": count(call.input_tokens),
                "output_tokens": count(call.output_tokens),
                "total_tokens": count(call.total_tokens),
                "details": details,
            }
        )
        meta = {
            "provider": self.provider,
            "model": model,
            "metrics_id": uid,
            "cost_usd": cost,
            "import": importer.source.name,
            "line": entry.line,
        }
        return metric, event_row(uid, self.session_id, self.last_generation, stamp, payload, meta)

    def _session(
        self, conn: Connection, first_line: int, stat: os.stat_result, digest: str
    ) -> None:
        scanned, result, row = self.scanned, self.result, self.row
        now = utcnow()
        values: dict[str, Any] = {
            "lines": scanned.consumed_lines,
            "bytes": scanned.consumed_bytes,
            "prefix_sha256": digest,
            "file_size": stat.st_size,
            "file_mtime": stat.st_mtime,
            "last_event_id": self.last_event,
            "last_generation_id": self.last_generation,
            "updated_at": now,
            "model": scanned.model[:MODEL_CHARS]
            if scanned.model
            else (row.model if row is not None else None),
            "provider": self.provider,
            "project": project(scanned.header) or (row.project if row is not None else None),
        }
        if row is None or row.texts_indexed_lines >= row.lines:
            # every earlier line's texts are indexed, and these lines' go in with them
            values["texts_indexed_lines"] = scanned.consumed_lines
        ended = parse_time(scanned.ended_at)
        if ended is not None:
            values["ended_at"] = ended
        if row is None:
            imports_repo.create(
                conn,
                {
                    "id": self.session_id,
                    "source": self.importer.source.name,
                    "file_path": result.path,
                    "external_id": (scanned.session_id or "")[:200] or None,
                    "agent_id": self.importer.agent_id,
                    "title": scanned.title,
                    "started_at": parse_time(scanned.started_at),
                    "messages": result.messages,
                    "problems": len(result.problems),
                    "kinds_json": result.kinds,
                    "calls": result.calls,
                    "cost_usd": result.cost_usd,
                    "header_json": header_kept(scanned.header),
                    "created_at": now,
                    **result.tokens.as_json(),
                    **values,
                },
            )
            self._problems(conn, first_line)
            return
        problems = self._problems(conn, first_line)
        kinds = dict(row.kinds_json or {})
        for k, v in result.kinds.items():
            kinds[k] = kinds.get(k, 0) + v
        imports_repo.update(
            conn,
            self.session_id,
            {
                "problems": problems,
                "kinds_json": kinds,
                "title": row.title or scanned.title,
                **values,
            },
            {
                "messages": result.messages,
                "calls": result.calls,
                "cost_usd": result.cost_usd,
                **result.tokens.as_json(),
            },
        )

    def _problems(self, conn: Connection, first_line: int) -> int:
        """This import's problems, replacing any reported before for the same lines (a
        cut-off last line is reported again when it is read again); how many the session
        has now."""
        return imports_repo.replace_problems(
            conn,
            self.session_id,
            first_line,
            [(p.line, p.reason) for p in self.result.problems],
            replace=self.row is not None,
        )
