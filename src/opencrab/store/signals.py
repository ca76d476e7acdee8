"""Wake-ups on commit: a write that makes work ready says so on a channel, and whoever
waits for that work hears of it once (and only if) the write commits.

`signal(conn, channel)` inside a write transaction marks the channel. When the
transaction commits, the callbacks this process registered for it on the Database
(`Database.on_commit`) run, in the thread that committed; on PostgreSQL the same
statement also queues a NOTIFY on the channel (delivered at commit, to every process
that LISTENs: `listen`). A rolled-back transaction signals nothing. Waiters keep their
poll as a fallback: a signal saves waiting, it is never the only way work is found.

Example (the ticket scheduler, tickets/scheduler.py):
    with db.write() as conn:                    # POST /api/tickets, in any process
        repo.insert_ticket(conn, ...)           # calls signal(conn, TICKETS)
    db.on_commit(TICKETS, scheduler.wake)       # this process: at once
    await listen(db, TICKETS, scheduler.wake)   # other processes (PostgreSQL)
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

TICKETS = "opencrab_tickets"
"""A ticket became runnable: created (`pending`), reset, resumed or answered."""

PENDING = "opencrab.signals"
"""The key in a connection's `info` holding the channels its transaction signalled."""

_NOTIFY = sa.text("SELECT pg_notify(:channel, '')")


def signal(conn: Connection, channel: str) -> None:
    """Mark `channel` to be signalled when `conn`'s transaction commits."""
    pending: set[str] = conn.info.setdefault(PENDING, set())
    if channel in pending:
        return
    pending.add(channel)
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY, {"channel": channel})


def take(conn: Connection) -> set[str]:
    """The channels `conn`'s transaction signalled, forgotten (Database does this at the
    end of every write transaction, committed or not)."""
    found: set[str] | None = conn.info.pop(PENDING, None)
    return found or set()


def listen(db: Any, channel: str, wake: Callable[[], None]) -> Coroutine[Any, Any, None] | None:
    """A coroutine calling `wake()` whenever another process signals `channel` (until
    cancelled; it also calls it once on listening), or None where the database cannot
    tell of other processes' commits (SQLite: the waiter polls)."""
    if db.dialect != "postgresql":
        return None
    from opencrab.store.dialects import postgresql

    return postgresql.listen(db.url.render_as_string(hide_password=False), channel, wake)
