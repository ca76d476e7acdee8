"""The AgentEvent log's rows (`events`): insert in bulk, read by trace and by sequence.

Rows arrive already encoded (`opencrab.event_log.event_row` is the one encoder, from
the seed-000 types); this module stores and reads them and knows nothing of payloads.
Every function runs on the caller's connection, inside the caller's transaction.

Example:
    with db.write() as conn:
        insert(conn, [event_row(...), ...])
    with db.read() as conn:
        rows = trace_rows(conn, trace_id)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.bulk import bulk_insert
from opencrab.store.prepared import Prepared
from opencrab.store.tables import events

_LOOKUP_CHUNK = 500


class EventRow(NamedTuple):
    """One event as stored (what `insert` takes): ids as text, timestamp in storage
    form, content and metadata as JSON text."""

    id: str
    trace_id: str
    parent_id: str | None
    type: str
    timestamp: str
    content: str
    metadata: str | None
    tool_call_id: str | None


COLUMNS: tuple[str, ...] = EventRow._fields
"""The columns `insert` writes, in EventRow order."""


class StoredEvent(NamedTuple):
    """One stored event as read back, with its insertion sequence number."""

    seq: int
    id: str
    trace_id: str
    parent_id: str | None
    type: str
    timestamp: str
    content: str
    metadata: str | None


_STORED = (
    events.c.seq,
    events.c.id,
    events.c.trace_id,
    events.c.parent_id,
    events.c.type,
    events.c.timestamp,
    events.c.content,
    events.c.metadata,
)


def insert(conn: Connection, rows: Sequence[EventRow], *, undoable: bool = False) -> None:
    """Store encoded rows with one executemany. `undoable`: a failure (a taken id) leaves
    `conn`'s transaction usable (a savepoint on PostgreSQL)."""
    if not rows:
        return
    bulk_insert(conn, events, COLUMNS, rows, recoverable=undoable)


def lookup(conn: Connection, ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Stored events among `ids`: id → (trace id, type)."""
    wanted = list(ids)
    found: dict[str, tuple[str, str]] = {}
    if len(wanted) == 1:  # most often: an event's parent
        row = _ONE.first(conn, event_id=wanted[0])
        return {} if row is None else {row.id: (row.trace_id, row.type)}
    for start in range(0, len(wanted), _LOOKUP_CHUNK):
        chunk = wanted[start : start + _LOOKUP_CHUNK]
        rows = conn.execute(
            sa.select(events.c.id, events.c.trace_id, events.c.type).where(events.c.id.in_(chunk))
        )
        for event_id, trace_id, type_ in rows:
            found[event_id] = (trace_id, type_)
    return found


_ONE = Prepared(
    sa.select(events.c.id, events.c.trace_id, events.c.type).where(
        events.c.id == sa.bindparam("event_id")
    )
)


def trace_rows(conn: Connection, trace_id: str) -> list[StoredEvent]:
    """Every event of a trace, in the order they were stored."""
    rows = conn.execute(
        sa.select(*_STORED).where(events.c.trace_id == trace_id).order_by(events.c.seq)
    )
    return [StoredEvent(*row) for row in rows]


def rows_after(conn: Connection, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
    """Events stored after sequence number `seq` (any trace), oldest first."""
    rows = conn.execute(
        sa.select(*_STORED).where(events.c.seq > seq).order_by(events.c.seq).limit(limit)
    )
    return [StoredEvent(*row) for row in rows]


_LAST_ID = Prepared(
    sa.select(events.c.id)
    .where(events.c.trace_id == sa.bindparam("trace_id"))
    .order_by(events.c.seq.desc())
    .limit(1)
)


def last_id(conn: Connection, trace_id: str) -> str | None:
    """The id of the trace's most recently stored event, None for an empty trace."""
    found = _LAST_ID.scalar(conn, trace_id=trace_id)
    return None if found is None else str(found)


def queue_last_id(conn: Connection, trace_id: str) -> None:
    """Send `last_id`'s read ahead (Prepared.queue: one round trip with others)."""
    _LAST_ID.queue(conn, trace_id=str(trace_id))


def exists(conn: Connection, trace_id: str) -> bool:
    """True when the trace has at least one event."""
    found = conn.execute(
        sa.select(events.c.seq).where(events.c.trace_id == trace_id).limit(1)
    ).first()
    return found is not None


def token_usage(conn: Connection, trace_id: str) -> list[tuple[str, str]]:
    """(parent id, content JSON) of the trace's token_usage events, in stored order (a
    token_usage event always has a parent)."""
    rows = conn.execute(
        sa.select(events.c.parent_id, events.c.content)
        .where(events.c.trace_id == trace_id, events.c.type == "token_usage")
        .order_by(events.c.seq)
    )
    return [(str(parent), content) for parent, content in rows]


def count(conn: Connection, trace_id: str) -> int:
    """How many events a trace has."""
    return int(
        conn.execute(
            sa.select(sa.func.count()).select_from(events).where(events.c.trace_id == trace_id)
        ).scalar_one()
    )
