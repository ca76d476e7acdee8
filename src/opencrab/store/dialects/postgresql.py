"""PostgreSQL specifics: engine options, read snapshots and the trigram index over memory logs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, func
from sqlalchemy.engine import Engine

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
    "pool_pre_ping": True,
    "pool_recycle": 1800,
}
"""Connection pool: a few connections per process (the event loop hands database work to
a small thread pool), checked before use and renewed every half hour so a restarted
server or a proxy's idle timeout never hands out a dead connection."""


def is_search_object(name: str) -> bool:
    """True for the trigram index, which no metadata declares."""
    return name == SEARCH_INDEX


def configure(engine: Engine) -> None:
    """Read transactions see one snapshot, like SQLite's under WAL.

    `Database.read()` promises a consistent snapshot for all its statements; PostgreSQL's
    default READ COMMITTED takes a new one per statement, so a read transaction starts
    with REPEATABLE READ (writes stay READ COMMITTED and wait on row locks as usual).
    """

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if not conn.get_execution_options().get("write", False):
            # straight to the driver: the first statement of the transaction psycopg opens
            conn.connection.dbapi_connection.execute(
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
            )


def utc_day(column: Any) -> Any:
    """`YYYY-MM-DD` of a TIMESTAMPTZ column in UTC, whatever the server's time zone."""
    return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")


def utc_week(column: Any) -> Any:
    """`YYYY-MM-DD` of the Monday (UTC) starting the week of a TIMESTAMPTZ column."""
    return func.to_char(func.date_trunc("week", func.timezone("UTC", column)), "YYYY-MM-DD")
