"""Dialect-specific SQL, kept apart so another database only adds a module here.

Memory search is one small interface: `search_memory(conn, MemoryQuery(...))` gives the
ids of an agent's matching session log lines with their scores, best first, whichever
database `conn` is on (SQLite: FTS5 trigram + bm25; PostgreSQL: pg_trgm-indexed ILIKE
with a bm25 score computed the same way). Every term is bound as a parameter and matched
literally: no character of it is query syntax on either database.

Example:
    hits = search_memory(conn, MemoryQuery(agent_id=a, terms=("東京", "weather"), limit=10))
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.base import Executable

# the query records live in their own module, which the dialect modules import (not
# this package, which imports them); re-exported: callers import them from here
from opencrab.store.dialects.queries import MemoryQuery as MemoryQuery
from opencrab.store.dialects.queries import TextQuery as TextQuery


def search_memory(conn: Connection, query: MemoryQuery) -> list[tuple[int, float]]:
    """(log line id, score: higher is better) of the lines matching `query`, best first."""
    if conn.dialect.name == "sqlite":
        from opencrab.store.dialects import sqlite

        return sqlite.search_memory(conn, query)
    from opencrab.store.dialects import postgresql

    return postgresql.search_memory(conn, query)


def search_import_texts(conn: Connection, query: TextQuery) -> list[int]:
    """Ids of the import_texts rows matching `query`, newest first, on either database."""
    if conn.dialect.name == "sqlite":
        from opencrab.store.dialects import sqlite

        return sqlite.search_import_texts(conn, query)
    from opencrab.store.dialects import postgresql

    return postgresql.search_import_texts(conn, query)


def upsert(dialect: Dialect, table: sa.Table, keys: Sequence[str], **values: Any) -> Executable:
    """INSERT `values` into `table`, or, when a row with the same `keys` (its primary key
    or a unique index) exists, UPDATE that row's other columns to them: one statement."""
    from sqlalchemy.dialects import postgresql as pg_sql
    from sqlalchemy.dialects import sqlite as lite_sql

    if dialect.name == "sqlite":
        lite = lite_sql.insert(table).values(**values)
        changed = {name: lite.excluded[name] for name in values if name not in keys}
        return lite.on_conflict_do_update(index_elements=list(keys), set_=changed)
    pg = pg_sql.insert(table).values(**values)
    changed = {name: pg.excluded[name] for name in values if name not in keys}
    return pg.on_conflict_do_update(index_elements=list(keys), set_=changed)


def accumulate(
    dialect: Dialect, table: sa.Table, keys: Sequence[str], rows: Sequence[dict[str, Any]]
) -> Executable:
    """INSERT `rows` into `table`; where a row with the same `keys` exists, ADD the new
    row's other columns to it instead (`col = col + excluded.col`): one statement, atomic
    per row on both databases, so concurrent writers never lose each other's sums."""
    from sqlalchemy.dialects import postgresql as pg_sql
    from sqlalchemy.dialects import sqlite as lite_sql

    make = lite_sql.insert if dialect.name == "sqlite" else pg_sql.insert
    stmt = make(table).values(list(rows))
    sums = [name for name in rows[0] if name not in keys]
    return stmt.on_conflict_do_update(
        index_elements=list(keys), set_={n: table.c[n] + stmt.excluded[n] for n in sums}
    )


@contextmanager
def recoverable(conn: Connection) -> Iterator[None]:
    """Run statements whose failure the caller handles and then keeps using `conn`.

    SQLite undoes only the failed statement; PostgreSQL aborts the whole transaction, so
    there the statements run in a savepoint that is rolled back when they fail.
    """
    if conn.dialect.name == "sqlite":
        yield
        return
    with conn.begin_nested():
        yield


Listen = Callable[[str, Callable[[], None]], Coroutine[Any, Any, None]]
"""`listen(url, wake)`: call `wake()` whenever events were committed, until cancelled."""


@dataclass(frozen=True)
class LiveTail:
    """How a reader tails the events table by seq on one database without skipping a row.

    `gap_secs`: how long a seq below the highest one read, which no committed row has,
    may still turn up (a transaction that took it commits later); 0 where rows commit in
    seq order. `gap_window`: how many seqs below the top a reader starting now checks
    for such gaps. `listen`: wakes the reader when another process commits events
    (None: the reader polls).
    """

    gap_secs: float
    gap_window: int
    listen: Listen | None


def live_tail(dialect: str) -> LiveTail:
    """The LiveTail of a database by its SQLAlchemy dialect name."""
    if dialect == "postgresql":
        from opencrab.store.dialects import postgresql

        return LiveTail(
            gap_secs=postgresql.LIVE_GAP_SECS,
            gap_window=postgresql.LIVE_GAP_WINDOW,
            listen=postgresql.listen_events,
        )
    # SQLite: one writer at a time, and a seq is taken inside the writing transaction,
    # so rows commit in seq order and a reader never sees a gap fill in later
    return LiveTail(gap_secs=0.0, gap_window=0, listen=None)
