"""The event log read as a feed: new rows by sequence number, for the live event hub.

Rows come back with the columns `event_log.row_json` turns into an event's seed-form
JSON (seq, id, trace_id, parent_id, timestamp, type, content, metadata). How a reader
can miss nothing on each database (a row with a lower seq may commit after one with a
higher seq on PostgreSQL) is the dialect's `LiveTail` (opencrab.store.dialects).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Row

from opencrab.store.database import Database
from opencrab.store.tables import events

FeedRow = Row[*tuple[Any, ...]]
"""One event row: seq, id, trace_id, parent_id, timestamp, type, content, metadata."""

_COLUMNS = (
    events.c.seq,
    events.c.id,
    events.c.trace_id,
    events.c.parent_id,
    events.c.timestamp,
    events.c.type,
    events.c.content,
    events.c.metadata,
)


def rows_after(
    db: Database, seq: int, *, missing: Collection[int] = (), limit: int = 1000
) -> list[FeedRow]:
    """Rows with seq > `seq`, and those of `missing` (seqs below it not seen yet), by seq."""
    newer = events.c.seq > seq
    where = sa.or_(newer, events.c.seq.in_(sorted(missing))) if missing else newer
    query = sa.select(*_COLUMNS).where(where).order_by(events.c.seq).limit(limit)
    with db.read() as conn:
        return list(conn.execute(query).all())


def last_seqs(db: Database, window: int) -> tuple[int, list[int]]:
    """The highest seq, and the seqs of the `window` below it that no committed row has
    (yet): where a feed starting now may still see a row appear."""
    with db.read() as conn:
        top = int(conn.execute(sa.select(sa.func.max(events.c.seq))).scalar() or 0)
        if window <= 0 or top == 0:
            return top, []
        low = max(0, top - window)
        present = set(
            conn.execute(
                sa.select(events.c.seq).where(events.c.seq > low, events.c.seq <= top)
            ).scalars()
        )
    return top, [s for s in range(low + 1, top) if s not in present]


def read_events(
    db: Database,
    traces: Iterable[str],
    *,
    after_seq: int = 0,
    before_seq: int | None = None,
    newest: bool = False,
    limit: int = 10_000,
) -> Sequence[FeedRow]:
    """Stored rows of the traces with after_seq < seq < before_seq, oldest first: the
    first `limit` of them, or the last when `newest`."""
    query = sa.select(*_COLUMNS).where(
        events.c.trace_id.in_(list(traces)), events.c.seq > after_seq
    )
    if before_seq is not None:
        query = query.where(events.c.seq < before_seq)
    query = query.order_by(events.c.seq.desc() if newest else events.c.seq).limit(limit)
    with db.read() as conn:
        rows = list(conn.execute(query).all())
    if newest:
        rows.reverse()
    return rows
