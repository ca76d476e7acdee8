"""PostgreSQL specifics: engine options, read snapshots, memory search over the trigram
index of memory logs, and the notifications that wake live event readers."""

from __future__ import annotations

import asyncio
import logging
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, func
from sqlalchemy.dialects.postgresql.base import ischema_names
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry

from opencrab.store.dialects.queries import (
    MemoryQuery,
    TextQuery,
    like_pattern,
    window_statement,
)

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
    "pool_recycle": 1800,
}
"""Connection pool: a few connections per process (the event loop hands database work to
a small thread pool), renewed every half hour; `configure` checks each before use."""

PING_AFTER_IDLE_SECS = 10.0
"""A pooled connection idle longer than this is pinged (a round trip) before use."""


IMPORT_SEARCH_INDEX = "ix_import_texts_text_trgm"
"""The GIN trigram index over `import_texts.text` (migration 0023)."""

IMPORT_SEARCH_CREATE = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"CREATE INDEX {IMPORT_SEARCH_INDEX} ON import_texts USING gin (text gin_trgm_ops)",
)
IMPORT_SEARCH_DROP = (f"DROP INDEX IF EXISTS {IMPORT_SEARCH_INDEX}",)


class _Vector(sa.types.UserDefinedType[Any]):
    """pgvector's `vector`, known to reflection (the column is read and written as text
    by store/repositories/memory_vectors.py)."""

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "vector"


ischema_names.setdefault("vector", _Vector)

VECTOR_COLUMN = "embedding"
"""memory_embeddings' pgvector column, present only where the extension is (migration
0042; store/repositories/memory_vectors.py): no metadata declares it."""

VECTOR_INDEX_PREFIX = "ix_memory_embeddings_hnsw_"
"""memory_embeddings' HNSW indexes, one per dimension (VECTOR_INDEX_PREFIX + "384")."""


def is_search_object(name: str) -> bool:
    """True for the trigram and HNSW indexes, which no metadata declares."""
    return name in (SEARCH_INDEX, IMPORT_SEARCH_INDEX) or name.startswith(VECTOR_INDEX_PREFIX)


def is_vector_column(obj: Any, name: str) -> bool:
    """True for memory_embeddings' pgvector column (see VECTOR_COLUMN)."""
    table = getattr(obj, "table", None)
    return name == VECTOR_COLUMN and getattr(table, "name", None) == "memory_embeddings"


def configure(engine: Engine) -> None:
    """Connections checked before use; read transactions see one snapshot, like SQLite's
    under WAL.

    `Database.read()` promises a consistent snapshot for all its statements; PostgreSQL's
    default READ COMMITTED takes a new one per statement, so a read transaction begins
    with `BEGIN ISOLATION LEVEL REPEATABLE READ` (writes stay READ COMMITTED and wait on
    row locks as usual): `transaction` sends it with the first statement; a transaction
    begun on the engine some other way gets the same levels from the `begin` hook.

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
        gone = _gone(dialect, dbapi_connection, idle)
        if gone is not None:
            raise DisconnectionError(f"pooled connection is gone: {gone}") from gone

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        raw = conn.connection.dbapi_connection
        wanted = None if conn.get_execution_options().get("write", False) else snapshot
        if raw.isolation_level != wanted:  # set between transactions: no round trip
            raw.isolation_level = wanted

    @event.listens_for(engine, "after_cursor_execute")
    def _on_executed(conn: Any, *_args: Any) -> None:
        settle(conn)  # SQLAlchemy reads the result (rows, rowcount) right after this


def _gone(dialect: Any, dbapi_connection: Any, idle_secs: float) -> Exception | None:
    """The failed ping's error when the server has closed the connection, else None: a
    connection idle up to PING_AFTER_IDLE_SECS is pinged only when not `_quiet`."""
    if idle_secs <= PING_AFTER_IDLE_SECS and _quiet(dbapi_connection):
        return None
    try:
        dialect.do_ping(dbapi_connection)
    except dialect.loaded_dbapi.Error as exc:
        failed: Exception = exc
        return failed
    return None


def check_alive(conn: Connection, idle_secs: float) -> bool:
    """The pool's checkout check (`configure`) for a connection kept out of the pool
    between transactions (store/database.py), idle `idle_secs`; one that fails is
    invalidated (the pool discards it) and False is returned."""
    if _gone(conn.dialect, conn.connection.dbapi_connection, idle_secs) is None:
        return True
    conn.invalidate()
    conn.close()
    return False


_USED = "opencrab_last_used"
"""Pool entry info key: when the connection was last handed back (monotonic seconds)."""

_PIPELINE = "opencrab_pipeline"
"""Pool entry info key: the psycopg pipeline of a `transaction` running on it."""

_QUEUED = "opencrab_queued_reads"
"""Pool entry info key: the reads queued ahead in a `transaction` (`queued_reads`)."""

READ_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ"
WRITE_BEGIN = "BEGIN"
"""How `transaction` begins a read (one snapshot for all its statements, like SQLite's
under WAL) and a write (READ COMMITTED, waiting on row locks as usual)."""


@contextmanager
def transaction(conn: Connection, begin: str) -> Iterator[None]:
    """`conn`'s transaction in psycopg's pipeline mode: statements are queued, and sent
    with the next one whose result is read; the BEGIN goes with the first, the COMMIT
    with the last statements nobody reads back (a step's inserts: one round trip).

    Begun and committed explicitly on a connection switched to autocommit for the
    while, so psycopg adds no BEGIN of its own (a round trip). A statement SQLAlchemy
    runs is settled at once (the `after_cursor_execute` hook: its result is read right
    after); `Prepared` and `bulk_insert` run through the driver and settle when they
    read (fetch, rowcount: `settle`). A failure anywhere rolls the whole transaction
    back and is raised as SQLAlchemy's exception (IntegrityError, …); one that only
    shows when the queue is sent may surface at a later statement or at the commit.
    """
    fairy = conn.connection
    raw = fairy.dbapi_connection
    assert raw is not None
    error = conn.dialect.loaded_dbapi.Error
    raw.autocommit = True
    try:
        with raw.pipeline() as pipeline:
            fairy.info[_PIPELINE] = pipeline
            fairy.info[_QUEUED] = {}
            try:
                raw.execute(begin)
                yield
                raw.execute("COMMIT")
            finally:
                del fairy.info[_PIPELINE]
                del fairy.info[_QUEUED]
    except BaseException as exc:
        _roll_back(raw, error)
        if isinstance(exc, error):
            raise sa.exc.DBAPIError.instance(
                "COMMIT", None, exc, error, dialect=conn.dialect
            ) from exc
        raise
    finally:
        if not raw.closed:
            raw.autocommit = False


def _roll_back(raw: Any, error: type[Exception]) -> None:
    """End a failed `transaction`'s server side (still open, or aborted)."""
    from psycopg.pq import TransactionStatus

    if raw.closed or raw.pgconn.transaction_status == TransactionStatus.IDLE:
        return
    with suppress(error):  # the connection itself failed: its transaction is lost anyway
        raw.execute("ROLLBACK")


def settle(conn: Connection) -> None:
    """Send what `conn`'s pipelined `transaction` queued and wait for its results, so
    the last statement's cursor holds its own (no-op outside one, and on SQLite)."""
    pipeline = conn.connection.info.get(_PIPELINE)
    if pipeline is not None:
        pipeline.sync()


def queued_reads(conn: Connection) -> dict[Any, Any] | None:
    """The reads sent ahead in `conn`'s pipelined `transaction` (store/prepared.py
    `Prepared.queue`), by SQL and parameters; None outside one (and on SQLite)."""
    found: dict[Any, Any] | None = conn.connection.info.get(_QUEUED)
    return found


def pipelined(conn: Connection) -> bool:
    """True inside a pipelined `transaction` (statements are queued, not yet sent)."""
    return _PIPELINE in conn.connection.info


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


def utc_week_of_day(column: Any) -> Any:
    """`YYYY-MM-DD` of the Monday starting the week of a `YYYY-MM-DD` text column."""
    day = sa.cast(column, sa.Date)
    return func.to_char(func.date_trunc("week", sa.cast(day, sa.DateTime)), "YYYY-MM-DD")


BM25_K1 = 1.2
BM25_B = 0.75
"""FTS5's bm25 constants: PostgreSQL ranks memory search hits with the same formula."""


def search_memory_sql(
    *,
    ranked: int,
    with_session: bool,
    log_types: int,
    terms: int,
    since: bool = False,
    until: bool = False,
) -> str:
    """SQL finding an agent's session log lines containing every term (ILIKE, which the
    trigram index serves); the first `ranked` terms score the hits with bm25 (as FTS5
    does: term frequency saturated by k1, line length normalised by b against the
    agent's average, idf clamped at 1e-6), else the newest lines come first, scored 0.

    Lengths are in bytes and each line is lowered once. idf only weighs terms against
    each other, so with one ranked term it is left out (the order is the same) and the
    pass over the agent's lines counting each term is saved.

    Parameters: :agent_id, :limit, :like_0.. (ILIKE patterns, `\\` escaping) for `terms`,
    :term_0.. (the raw text) for the `ranked` ones, :session_id when `with_session`,
    :log_type_0.. for `log_types`, :since/:until when `since`/`until` (the time window).
    """
    where = ["m.agent_id = :agent_id"]
    if with_session:
        where.append("m.session_id = :session_id")
    if log_types:
        names = ", ".join(f":log_type_{i}" for i in range(log_types))
        where.append(f"m.log_type IN ({names})")
    if since:
        where.append("m.created_at >= :since")
    if until:
        where.append("m.created_at < :until")
    where += [f"m.content ILIKE :like_{i} ESCAPE '\\'" for i in range(terms)]
    if not ranked:
        return (
            f"SELECT m.id, 0.0 AS score FROM memory_sessions AS m "
            f"WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT :limit"
        )
    counts = "".join(
        f", count(*) FILTER (WHERE content ILIKE :like_{i} ESCAPE '\\') AS df_{i}"
        for i in range(ranked if ranked > 1 else 0)
    )
    frequencies = ", ".join(
        f"CAST(octet_length(l.lc) - octet_length(replace(l.lc, lower(:term_{i}), '')) "
        f"AS double precision) / octet_length(lower(:term_{i})) AS tf_{i}"
        for i in range(ranked)
    )
    norm = f"{BM25_K1} * (1 - {BM25_B} + {BM25_B} * h.len / greatest(s.avglen, 1))"
    parts = []
    for i in range(ranked):
        idf = (
            f"greatest(ln((s.n - s.df_{i} + 0.5) / (s.df_{i} + 0.5)), 1e-6) * "
            if ranked > 1
            else ""
        )
        parts.append(f"{idf}h.tf_{i} * {BM25_K1 + 1} / (h.tf_{i} + {norm})")
    return (
        f"WITH s AS (SELECT CAST(count(*) AS double precision) AS n, "
        f"CAST(avg(octet_length(content)) AS double precision) AS avglen{counts} "
        f"FROM memory_sessions WHERE agent_id = :agent_id), "
        f"h AS MATERIALIZED (SELECT m.id, octet_length(m.content) AS len, {frequencies} "
        f"FROM memory_sessions AS m "
        f"CROSS JOIN LATERAL (SELECT lower(m.content) AS lc OFFSET 0) AS l "
        f"WHERE {' AND '.join(where)}) "
        f"SELECT h.id, {' + '.join(parts)} AS score FROM h CROSS JOIN s "
        f"ORDER BY score DESC, h.id DESC LIMIT :limit"
    )


def search_memory(conn: Connection, query: MemoryQuery) -> list[tuple[int, float]]:
    """Case-insensitive ILIKE for every term; terms of 3+ characters rank the hits with
    bm25 over the agent's lines (as FTS5 does over its index); with none, newest first."""
    ranked = query.ranked_terms
    terms = [*ranked, *query.short_terms]
    sql = search_memory_sql(
        ranked=len(ranked),
        with_session=query.session_id is not None,
        log_types=len(query.log_types),
        since=query.since is not None,
        until=query.until is not None,
        terms=len(terms),
    )
    params: dict[str, Any] = {
        "agent_id": query.agent_id,
        "limit": query.limit,
        **{f"like_{i}": like_pattern(t) for i, t in enumerate(terms)},
        **{f"term_{i}": t for i, t in enumerate(ranked)},
        **{f"log_type_{i}": t for i, t in enumerate(query.log_types)},
    }
    if query.session_id is not None:
        params["session_id"] = query.session_id
    statement = window_statement(sql, query, params)
    return [(int(r.id), float(r.score)) for r in conn.execute(statement, params)]


EVENTS_CHANNEL = "opencrab_events"
"""The NOTIFY channel a commit that wrote events signals on (no payload: readers re-read)."""

LIVE_CREATE = (
    "CREATE OR REPLACE FUNCTION opencrab_events_notify() RETURNS trigger "
    f"LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('{EVENTS_CHANNEL}', ''); "
    "RETURN NULL; END $$",
    "CREATE TRIGGER events_notify AFTER INSERT ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION opencrab_events_notify()",
)
"""What migration 0018 adds: every statement inserting events notifies EVENTS_CHANNEL in
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
    """LISTEN on EVENTS_CHANNEL and call `wake()` for every notification, until cancelled
    (see `listen`)."""
    await listen(url, EVENTS_CHANNEL, wake)


async def listen(url: str, channel: str, wake: Callable[[], None]) -> None:
    """LISTEN on `channel` and call `wake()` for every notification, until cancelled.

    A dedicated connection (psycopg's async one, outside the pool). It reconnects after
    losing the server, calling `wake()` again then: what committed meanwhile is re-read.
    """
    import psycopg

    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {channel}")
                wake()  # whatever committed before this listened
                async for _ in conn.notifies():
                    wake()
        except psycopg.Error as exc:
            log.warning("listening on %s failed (%s); trying again", channel, exc)
            await asyncio.sleep(LISTEN_RETRY_SECS)


def search_import_texts(conn: Connection, query: TextQuery) -> list[int]:
    """Ids of import_texts rows holding every term (case-insensitive ILIKE, which the
    trigram index serves), newest first."""
    where = [f"t.text ILIKE :like_{i} ESCAPE '\\'" for i in range(len(query.terms))]
    params: dict[str, Any] = {"limit": query.limit, "offset": query.offset}
    params.update({f"like_{i}": like_pattern(term) for i, term in enumerate(query.terms)})
    sql = (
        f"SELECT t.id FROM import_texts AS t WHERE {' AND '.join(where) or 'true'} "
        f"ORDER BY t.timestamp DESC, t.id DESC LIMIT :limit OFFSET :offset"
    )
    return [int(row.id) for row in conn.execute(sa.text(sql), params)]
