"""PostgreSQL specifics: engine options, read snapshots, the trigram index over memory logs
and the notifications that wake live event readers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url

log = logging.getLogger(__name__)

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


EVENTS_CHANNEL = "opencrab_events"
"""The NOTIFY channel a commit that wrote events signals on (no payload: readers re-read)."""

LIVE_CREATE = (
    "CREATE OR REPLACE FUNCTION opencrab_events_notify() RETURNS trigger "
    f"LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('{EVENTS_CHANNEL}', ''); "
    "RETURN NULL; END $$",
    "CREATE TRIGGER events_notify AFTER INSERT ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION opencrab_events_notify()",
)
"""What migration 0017e adds: every statement inserting events notifies EVENTS_CHANNEL in
its transaction, so listeners hear of it when (and only if) it commits, whoever wrote."""

LIVE_DROP = (
    "DROP TRIGGER IF EXISTS events_notify ON events",
    "DROP FUNCTION IF EXISTS opencrab_events_notify()",
)
"""Undoes LIVE_CREATE."""

LIVE_GAP_SECS = 60.0
"""Seqs come from a sequence when a row is inserted, not when it commits: a row with a
lower seq may commit after one with a higher seq. A seq missing below the highest one
read is looked for again until this long has passed (a rolled-back insert never fills)."""

LIVE_GAP_WINDOW = 1000
"""Seqs below the top a reader starting now checks for rows not committed yet."""

LISTEN_RETRY_SECS = 1.0


async def listen_events(url: str, wake: Callable[[], None]) -> None:
    """LISTEN on EVENTS_CHANNEL and call `wake()` for every notification, until cancelled.

    A dedicated connection (psycopg's async one, outside the pool). It reconnects after
    losing the server, calling `wake()` again then: what committed meanwhile is re-read.
    """
    import psycopg

    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                wake()  # whatever committed before this listened
                async for _ in conn.notifies():
                    wake()
        except psycopg.Error as exc:
            log.warning("listening for new events failed (%s); trying again", exc)
            await asyncio.sleep(LISTEN_RETRY_SECS)
