"""Dialect-specific SQL, kept apart so another database only adds a module here."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection


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
