"""OpenCode's sessions: the tokens of each model call, as LLM usage metrics.

OpenCode (1.18) keeps its sessions in one SQLite database, `opencode.db` under
`$XDG_DATA_HOME/opencode` (`~/.local/share/opencode`), in WAL mode: the newest rows are
often still in `opencode.db-wal`. Its `message` table holds a row per message (`id`,
`session_id`, `time_created`, `time_updated` in milliseconds since the epoch, and
`data`: the message as JSON, without its id). An assistant message is one model call
(one step: a turn that calls tools is several) and carries `providerID`, `modelID`,
`time: {created, completed}`, `cost`, `error` when it failed, and `tokens: {input,
output, reasoning, cache: {read, write}}`, where input leaves out the cache reads and
writes and output leaves out the reasoning.

Only the usage is imported: the normalized transcript vocabulary (seed 003's source
types) has no OpenCode source, so these sessions are not import sessions and do not
appear among the transcripts. Each assistant message that is finished (completed, or
failed: status `error`, the error's name as its type) and has tokens becomes one
`llm_usage_metrics` row, purpose `import`, task type `opencode`, the provider and model
OpenCode names (the "opencrab" provider agent mode configures is priced as its model,
pricing rule 5), its cost from the pricing table or, when the table does not price it,
the one OpenCode computed (when above zero). Its id is derived from OpenCode's message
id and its session from OpenCode's session id, so reading the database again (it grows
while the CLI runs) adds only the calls not stored yet. Its latency runs from the
message's creation to its completion.

In OpenCrab's Usage convention input includes the cache reads and writes and output
includes the reasoning. The database is opened read-only (`mode=ro`, which still reads
the WAL; `immutable` when that cannot open it and there is no WAL to miss) with
`trusted_schema` off: no row or file of OpenCode's is written (a reader's marks in the
WAL's shared-memory index `-shm` aside, as every reader of a WAL database leaves). A
file that cannot be read as such a database (not SQLite, corrupt, no `message` table
with those columns, over `[imports] max_decompressed_mb` with its WAL, more messages
than `[imports] max_lines`) is one Problem naming it and gives no call; a message that
cannot be read (data not a JSON object or over the line limit, a count that is not a
whole number from 0 to 2^31-1, tokens without input or output) is a Problem naming the
file and the message's place in it (ordered by creation); the rest of the database is
still imported.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid5

import orjson

from opencrab.importers.common import (
    MB,
    Problem,
    ReadLimits,
    UsageImport,
    find_files,
    import_usage_of,
    shown,
    text_or_none,
)
from opencrab.importers.rows import I32
from opencrab.importers.store import MODEL_CHARS, NAMESPACE, PROVIDER_CHARS
from opencrab.llm.metrics import CallRecord
from opencrab.llm.pricing import MAX_PRICE_PER_1M, PriceBook
from opencrab.llm.types import Usage
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.types import utcnow

SOURCE = "opencode"
DATABASES = "opencode*.db"  # opencode.db (a release channel's build may add a suffix)
REQUIRED = ("input", "output")
ERROR_TYPE_CHARS = 64  # what llm_usage_metrics.error_type holds
LAST_MS = 253402300799999  # 9999-12-31T23:59:59.999Z: a later time is not a time
MESSAGES = (
    "SELECT id, session_id, time_created,"
    " CASE WHEN length(data) <= ? THEN data END, length(data)"
    " FROM message ORDER BY time_created, id LIMIT ?"
)


@dataclass(frozen=True)
class Call:
    """One model call an assistant message records."""

    message_id: str
    session: str  # OpenCode's session id
    provider: str
    model: str
    at: datetime  # its completion (else its creation)
    usage: Usage
    latency_ms: int | None
    cost: float | None  # what OpenCode computed, when above zero
    error_type: str | None = None  # the error's name, when the call failed


@dataclass
class DatabaseUsage:
    """The model calls one OpenCode database records (by message id) and its problems."""

    path: Path
    calls: dict[str, Call] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def session_id_of(session: str) -> str:
    """The metrics session id of an OpenCode session (stable for its id)."""
    return str(uuid5(NAMESPACE, f"{SOURCE}:{session}"))


def find_databases(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[Path], list[Problem]]:
    """OpenCode databases under the paths (`opencode*.db`; files are taken as given)."""
    return find_files(paths, DATABASES, (".db",))


def read_database(path: Path, limits: ReadLimits | None = None) -> DatabaseUsage:
    """The model calls an OpenCode database records, read without writing to it; a file
    that cannot be read as one (or is over `limits`) is one Problem and gives no call."""
    limits = limits or ReadLimits()
    found = DatabaseUsage(path)
    try:
        _check_size(path, limits)
        with closing(_connect(path)) as conn:
            _read(found, conn, limits)
    except _Refused as exc:
        found.calls.clear()
        found.problems = [Problem(str(path), 0, str(exc))]
    except sqlite3.Error as exc:
        found.calls.clear()
        found.problems = [Problem(str(path), 0, f"not an OpenCode database: {exc}")]
    except OSError as exc:
        found.calls.clear()
        found.problems = [Problem(str(path), 0, f"not read: {exc.strerror or exc}")]
    return found


class _Refused(Exception):
    """A database the import does not read at all, and why."""


def _check_size(path: Path, limits: ReadLimits) -> None:
    wal = path.with_name(path.name + "-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.is_file() else 0)
    if size > limits.max_bytes:
        raise _Refused(
            f"more than {limits.max_bytes // MB} MB with its WAL; not imported "
            "(the limit is [imports] max_decompressed_mb)"
        )


def _connect(path: Path) -> sqlite3.Connection:
    """The database opened read-only: `mode=ro` reads the WAL too; `immutable` (which
    takes the file as it is) only when that cannot open it and there is no WAL."""
    uri = path.resolve().as_uri()
    try:
        return _opened(f"{uri}?mode=ro")
    except sqlite3.OperationalError:
        wal = path.with_name(path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            raise
        return _opened(f"{uri}?mode=ro&immutable=1")


def _opened(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        # a schema's own functions (generated columns, views) run as if untrusted
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file
    except BaseException:
        conn.close()
        raise
    return conn


def _read(found: DatabaseUsage, conn: sqlite3.Connection, limits: ReadLimits) -> None:
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'message'").fetchone()
    if kind is None or kind[0] != "table":
        raise _Refused("not an OpenCode database: it has no message table")
    rows = conn.execute(MESSAGES, (limits.max_line_bytes, limits.max_lines + 1))
    for number, row in enumerate(rows, start=1):
        if number > limits.max_lines:
            raise _Refused(
                f"more than {limits.max_lines} messages; not imported "
                "(the limit is [imports] max_lines)"
            )
        _message(found, number, row, limits)


def _message(found: DatabaseUsage, number: int, row: tuple[Any, ...], limits: ReadLimits) -> None:
    message_id, session, created, data, length = row
    where = f"message {shown(message_id)}"
    if data is None:
        why = "data is missing" if length is None else f"data of {length} characters, skipped"
        found.problems.append(Problem(str(found.path), number, f"{where}: {why}"))
        return
    try:
        message = orjson.loads(data) if isinstance(data, str | bytes) else data
    except orjson.JSONDecodeError as exc:
        found.problems.append(Problem(str(found.path), number, f"{where}: not JSON: {exc}"))
        return
    if not isinstance(message, dict):
        reason = f"{where}: data is {type(message).__name__}, not a JSON object"
        found.problems.append(Problem(str(found.path), number, reason))
        return
    if message.get("role") != "assistant":
        return
    call = _call(message, message_id, session, created)
    if isinstance(call, str):
        found.problems.append(Problem(str(found.path), number, f"{where}: {call}"))
    elif call is not None:
        found.calls[call.message_id] = call


def _call(
    message: dict[str, Any], message_id: Any, session: Any, created: Any
) -> Call | str | None:
    """An assistant message's call; why it cannot be read; None while it runs (a later
    import stores it) or when it spent no tokens."""
    times = message.get("time")
    times = times if isinstance(times, dict) else {}
    error = message.get("error")
    if times.get("completed") is None and error is None:
        return None
    tokens = message.get("tokens")
    if tokens is None:
        return None
    if not isinstance(tokens, dict):
        return f"tokens is {type(tokens).__name__}, not an object"
    missing = [name for name in REQUIRED if name not in tokens]
    if missing:
        return f"tokens without {' or '.join(missing)}"
    cache = tokens.get("cache", {})
    if not isinstance(cache, dict):
        return f"tokens.cache is {type(cache).__name__}, not an object"
    counts: dict[str, int] = {}
    for name, value in (
        *((n, tokens.get(n, 0)) for n in ("input", "output", "reasoning")),
        *((f"cache.{n}", cache.get(n, 0)) for n in ("read", "write")),
    ):
        if type(value) is not int or not 0 <= value <= I32:
            return f"tokens.{name} = {shown(value)} is not a token count"
        counts[name] = value
    input_tokens = counts["input"] + counts["cache.read"] + counts["cache.write"]
    output_tokens = counts["output"] + counts["reasoning"]
    if input_tokens + output_tokens > I32:
        return f"{input_tokens + output_tokens} tokens in one call is not a count"
    if input_tokens + output_tokens == 0:
        return None  # failed before the model answered
    if not isinstance(message_id, str) or not message_id:
        return "has no id, so its tokens are not counted"
    begun, ended = _moment(times.get("created")), _moment(times.get("completed"))
    latency = None
    if begun is not None and ended is not None and ended >= begun:
        latency = min(int((ended - begun).total_seconds() * 1000), I32)
    provider, model = text_or_none(message.get("providerID")), text_or_none(message.get("modelID"))
    cost = message.get("cost")
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        cache_read_tokens=counts["cache.read"],
        cache_write_tokens=counts["cache.write"],
        reasoning_tokens=counts["reasoning"],
    )
    return Call(
        message_id=message_id,
        session=session if isinstance(session, str) and session else message_id,
        provider=provider[:PROVIDER_CHARS] if provider else "unknown",
        model=model[:MODEL_CHARS] if model else "unknown",
        at=ended or begun or _moment(created) or utcnow(),
        usage=usage,
        latency_ms=latency,
        cost=cost if _plausible_cost(cost, usage) else None,
        error_type=_error_type(error),
    )


def _error_type(error: object) -> str | None:
    """The name of a failed call's error (`{"name": …, "data": …}`), else "error"."""
    if error is None:
        return None
    name = text_or_none(error.get("name")) if isinstance(error, dict) else None
    return name[:ERROR_TYPE_CHARS] if name else "error"


def _plausible_cost(cost: object, usage: Usage) -> bool:
    """A cost above zero, and no more than the dearest price a table accepts."""
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
        return False
    return 0 < cost <= usage.total_tokens * MAX_PRICE_PER_1M / 1_000_000


def _moment(value: object) -> datetime | None:
    """Milliseconds since the epoch as a UTC datetime; None when not such a number."""
    if type(value) is not int or not 0 <= value <= LAST_MS:
        return None
    return datetime.fromtimestamp(value / 1000, UTC)


# ------------------------------------------------------------------ storing
def import_usage(
    db: Database,
    paths: Iterable[str | os.PathLike[str]],
    *,
    agent_id: str | None,
    prices: PriceBook | None = None,
    limits: ReadLimits | None = None,
) -> UsageImport:
    """Store the calls of every OpenCode database under `paths` not stored yet, under
    `agent_id` (the "system" agent when None); one transaction per database."""
    return import_usage_of(
        db,
        find_databases(paths),
        lambda path: read_database(path, limits),
        lambda found, book: _rows(found, agent_id or "system", book),
        prices,
    )


def _rows(
    found: DatabaseUsage, agent_id: str, prices: PriceBook
) -> Iterator[metrics_repo.MetricRow]:
    for message_id, call in found.calls.items():
        cost, cost_source = prices.cost(call.provider, call.model, call.usage)
        if cost_source == "unknown" and call.cost is not None:
            cost, cost_source = call.cost, "provider"
        record = CallRecord(
            id=str(uuid5(NAMESPACE, f"{SOURCE}:{call.session}:{message_id}")),
            provider=call.provider,
            model=call.model,
            purpose="import",
            agent_id=agent_id,
            session_id=session_id_of(call.session),
            task_type=SOURCE,
            input_tokens=call.usage.input_tokens,
            output_tokens=call.usage.output_tokens,
            total_tokens=call.usage.total_tokens,
            cache_read_tokens=call.usage.cache_read_tokens,
            cache_write_tokens=call.usage.cache_write_tokens,
            reasoning_tokens=call.usage.reasoning_tokens,
            estimated_cost_usd=cost,
            cost_source=cost_source,
            latency_ms=call.latency_ms or 0,
            status="ok" if call.error_type is None else "error",
            error_type=call.error_type,
            timestamp=call.at,
        )
        # one encoder of a call's row (CallRecord.as_row); stored now, as before
        yield record.as_row()._replace(created_at=utcnow())
