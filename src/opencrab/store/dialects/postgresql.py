"""PostgreSQL specifics: engine options, read snapshots and the trigram index over memory logs."""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, func
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry

SEARCH_INDEX = "ix_memory_sessions_content_trgm"
"""The GIN trigram index over `memory_sessions.content` (pg_trgm: works for CJK and
English, and serves `LIKE '%term%'` and `%` similarity alike); no metadata declares it."""

SEARCH_CREATE = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"CREATE INDEX {SEARCH_INDEX} ON memory_sessions USING gin (content gin_trgm_ops)",
)
"""What migration 0001 adds on PostgreSQL where SQLite gets its FTS5 table."""

SEARCH_DROP = (f"DROP INDEX IF EXISTS {SEARCH_INDEX}",)
"""Undoes SEARCH_CREATE (the extension stays: other databases' objects may use it)."""

ENGINE_OPTIONS: dict[str, Any] = {
    "pool_size": 10,
    "max_overflow": 20,
    "pool_recycle": 1800,
}
"""Connection pool: a few connections per process (the event loop hands database work to
a small thread pool), renewed every half hour; `configure` checks each before use."""

PING_AFTER_IDLE_SECS = 10.0
"""A pooled connection idle longer than this is pinged (a round trip) before use."""


def is_search_object(name: str) -> bool:
    """True for the trigram index, which no metadata declares."""
    return name == SEARCH_INDEX


def configure(engine: Engine) -> None:
    """Connections checked before use; read transactions see one snapshot, like SQLite's
    under WAL.

    `Database.read()` promises a consistent snapshot for all its statements; PostgreSQL's
    default READ COMMITTED takes a new one per statement, so a read transaction begins
    with `BEGIN ISOLATION LEVEL REPEATABLE READ` (writes stay READ COMMITTED and wait on
    row locks as usual). psycopg sends that BEGIN with the transaction's first statement,
    so the isolation level costs no round trip of its own.

    A connection handed out by the pool is never a dead one (a restarted server, a
    terminated backend, a proxy's idle timeout): one the server has closed has something
    to read on its socket (the server's goodbye, or end of file), which costs a `select`
    to see and then a ping to confirm; one idle longer than PING_AFTER_IDLE_SECS is
    pinged anyway. A failed ping discards the connection and the pool opens another.
    That replaces SQLAlchemy's `pool_pre_ping`, a round trip on every checkout (four of
    an agent turn's forty).
    """
    from psycopg import IsolationLevel  # here: psycopg is only needed for PostgreSQL

    dialect = engine.dialect
    snapshot = IsolationLevel.REPEATABLE_READ

    @event.listens_for(engine, "connect")
    def _on_connect(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_USED] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_USED] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        idle = time.monotonic() - record.info.get(_USED, 0.0)
        if idle <= PING_AFTER_IDLE_SECS and _quiet(dbapi_connection):
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError(f"pooled connection is gone: {exc}") from exc

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        raw = conn.connection.dbapi_connection
        wanted = None if conn.get_execution_options().get("write", False) else snapshot
        if raw.isolation_level != wanted:  # set between transactions: no round trip
            raw.isolation_level = wanted


_USED = "opencrab_last_used"
"""Pool entry info key: when the connection was last handed back (monotonic seconds)."""


def _quiet(dbapi_connection: Any) -> bool:
    """True when the connection looks open and the server has sent nothing on it since:
    a closed or terminated one has its goodbye or end of file waiting to be read."""
    from psycopg.pq import ConnStatus

    pgconn = dbapi_connection.pgconn
    if dbapi_connection.closed or pgconn.status != ConnStatus.OK:
        return False
    readable, _, _ = select.select([pgconn.socket], [], [], 0)
    return not readable


_SAVEPOINT = "opencrab_recoverable"


@contextmanager
def pipelined_savepoint(conn: Connection) -> Iterator[None]:
    """The block's driver statements in a savepoint, all sent in one round trip.

    psycopg's pipeline mode queues the savepoint, the statements and its release (and a
    BEGIN still pending) and sends them together when the block ends; a failure rolls
    back to the savepoint, so the transaction stays usable, and is raised as SQLAlchemy's
    exception (IntegrityError, …). Results and errors arrive only at the end, so the
    block runs statements nobody reads back, through the driver: `bulk_insert`.
    """
    raw = conn.connection.dbapi_connection
    assert raw is not None
    error = conn.dialect.loaded_dbapi.Error
    try:
        with raw.pipeline():
            raw.execute(f"SAVEPOINT {_SAVEPOINT}")
            yield
            raw.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    except BaseException as exc:
        try:
            raw.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            raw.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        except error:
            pass  # the connection itself failed: its transaction is lost either way
        if isinstance(exc, error):
            raise sa.exc.DBAPIError.instance(
                f"SAVEPOINT {_SAVEPOINT} …", None, exc, error, dialect=conn.dialect
            ) from exc
        raise


def utc_day(column: Any) -> Any:
    """`YYYY-MM-DD` of a TIMESTAMPTZ column in UTC, whatever the server's time zone."""
    return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")


def utc_week(column: Any) -> Any:
    """`YYYY-MM-DD` of the Monday (UTC) starting the week of a TIMESTAMPTZ column."""
    return func.to_char(func.date_trunc("week", func.timezone("UTC", column)), "YYYY-MM-DD")
