"""SQLite specifics: connection pragmas and the FTS5 index over memory session logs."""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, func
from sqlalchemy.engine import Connection, Engine

from opencrab.store.dialects.queries import (
    MemoryQuery,
    TextQuery,
    like_pattern,
    window_statement,
)

FTS_TABLE = "memory_sessions_fts"
"""The FTS5 index over `memory_sessions.content` (trigram: works for CJK and English)."""


IMPORT_FTS_TABLE = "import_texts_fts"
"""The FTS5 index over `import_texts.text` (trigram), kept in step by triggers (0023)."""


def is_fts_object(name: str) -> bool:
    """True for the FTS5 tables and their shadow tables, which no metadata declares."""
    return any(name == t or name.startswith(t + "_") for t in (FTS_TABLE, IMPORT_FTS_TABLE))


def configure(engine: Engine, *, busy_timeout_ms: int) -> None:
    """Per-connection pragmas, and explicit BEGIN so writers can take the lock up front.

    pysqlite's implicit transactions are switched off; a connection with the execution
    option `write=True` starts with BEGIN IMMEDIATE, so two writers never deadlock on a
    read-to-write upgrade and wait for each other up to the busy timeout instead.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("write", False)
        # straight to the driver: SQLAlchemy's statement bookkeeping costs more than BEGIN
        conn.connection.dbapi_connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")


FTS_PENDING = FTS_TABLE + "_pending"
"""Row ids of log lines written but not indexed yet (migration 0004)."""


def fts_pending(conn: Connection) -> bool:
    """True when some log lines wait to be indexed."""
    return conn.exec_driver_sql(f"SELECT 1 FROM {FTS_PENDING} LIMIT 1").first() is not None


def fts_catch_up(conn: Connection) -> int:
    """Index every queued log line, in `conn`'s write transaction; returns how many.

    One batch makes one FTS5 segment, however many lines it holds: far cheaper than
    indexing each line in the transaction that writes it.
    """
    done = conn.exec_driver_sql(
        f"INSERT INTO {FTS_TABLE}(rowid, content, agent_id, session_id, log_type) "
        f"SELECT m.id, m.content, m.agent_id, m.session_id, m.log_type "
        f"FROM {FTS_PENDING} AS p JOIN memory_sessions AS m ON m.id = p.id ORDER BY p.id"
    )
    conn.exec_driver_sql(f"DELETE FROM {FTS_PENDING}")
    return int(done.rowcount)


def fts_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression that ANDs `terms` as literal phrases.

    Each term is double-quoted with inner quotes doubled, so FTS5 operators (AND, OR,
    NEAR, `*`, `:`, parentheses) in user or model text are searched for, never obeyed.
    The trigram tokenizer needs 3 characters per term; shorter terms go to LIKE.
    """
    return " AND ".join('"' + term.replace('"', '""') + '"' for term in terms)


def search_memory_sql(
    *,
    ranked: bool,
    with_session: bool,
    log_types: int,
    short_terms: int,
    since: bool = False,
    until: bool = False,
) -> str:
    """SQL finding an agent's session log lines: ranked with bm25 (lower is better in
    FTS5) when `ranked`, else the newest lines matching every term with LIKE.

    Parameters: :agent_id, :limit, :match when `ranked`, :session_id when
    `with_session`, :log_type_0.. for `log_types`, :since/:until when `since`/`until`
    (the time window), :like_0.. for `short_terms` (LIKE
    patterns, `\\` escaping; without `ranked`, every term is a LIKE term).
    """
    where = ["m.agent_id = :agent_id"]
    if ranked:
        where.insert(0, f"{FTS_TABLE} MATCH :match")
    if with_session:
        where.append("m.session_id = :session_id")
    if log_types:
        names = ", ".join(f":log_type_{i}" for i in range(log_types))
        where.append(f"m.log_type IN ({names})")
    if since:
        where.append("m.created_at >= :since")
    if until:
        where.append("m.created_at < :until")
    where += [f"m.content LIKE :like_{i} ESCAPE '\\'" for i in range(short_terms)]
    if not ranked:
        return (
            f"SELECT m.id, 0.0 AS rank FROM memory_sessions AS m "
            f"WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT :limit"
        )
    return (
        f"SELECT m.id, bm25({FTS_TABLE}) AS rank "
        f"FROM {FTS_TABLE} JOIN memory_sessions AS m ON m.id = {FTS_TABLE}.rowid "
        f"WHERE {' AND '.join(where)} ORDER BY rank, m.id DESC LIMIT :limit"
    )


def utc_day(column: Any) -> Any:
    """`YYYY-MM-DD` of a UtcDateTime column in UTC (stored as fixed-width UTC text)."""
    return func.substr(column, 1, 10)


def utc_week(column: Any) -> Any:
    """`YYYY-MM-DD` of the Monday (UTC) starting the week of a UtcDateTime column."""
    return func.date(func.substr(column, 1, 10), "-6 days", "weekday 1")


def utc_week_of_day(column: Any) -> Any:
    """`YYYY-MM-DD` of the Monday starting the week of a `YYYY-MM-DD` text column."""
    return func.date(column, "-6 days", "weekday 1")


def search_memory(conn: Connection, query: MemoryQuery) -> list[tuple[int, float]]:
    """FTS5 trigram MATCH ranked by bm25 for terms of 3+ characters, LIKE for shorter ones
    (ASCII case-insensitive, like the trigram index); with no long term, newest first."""
    ranked = query.ranked_terms
    likes = query.short_terms if ranked else list(query.terms)
    sql = search_memory_sql(
        ranked=bool(ranked),
        with_session=query.session_id is not None,
        log_types=len(query.log_types),
        since=query.since is not None,
        until=query.until is not None,
        short_terms=len(likes),
    )
    params: dict[str, Any] = {
        "agent_id": query.agent_id,
        "limit": query.limit,
        **{f"like_{i}": like_pattern(t) for i, t in enumerate(likes)},
        **{f"log_type_{i}": t for i, t in enumerate(query.log_types)},
    }
    if ranked:
        params["match"] = fts_query(ranked)
    if query.session_id is not None:
        params["session_id"] = query.session_id
    statement = window_statement(sql, query, params)
    return [(int(r.id), -float(r.rank) or 0.0) for r in conn.execute(statement, params)]


IMPORT_SEARCH_CREATE = (
    f"""CREATE VIRTUAL TABLE {IMPORT_FTS_TABLE} USING fts5(
        text, content='import_texts', content_rowid='id', tokenize='trigram'
    )""",
    f"""CREATE TRIGGER {IMPORT_FTS_TABLE}_insert AFTER INSERT ON import_texts BEGIN
        INSERT INTO {IMPORT_FTS_TABLE}(rowid, text) VALUES (new.id, new.text);
    END""",
    f"""CREATE TRIGGER {IMPORT_FTS_TABLE}_delete AFTER DELETE ON import_texts BEGIN
        INSERT INTO {IMPORT_FTS_TABLE}({IMPORT_FTS_TABLE}, rowid, text)
        VALUES ('delete', old.id, old.text);
    END""",
)
"""What migration 0023 adds on SQLite (import_texts rows are never updated, only
inserted, and deleted with their session)."""

IMPORT_SEARCH_DROP = (
    f"DROP TRIGGER IF EXISTS {IMPORT_FTS_TABLE}_delete",
    f"DROP TRIGGER IF EXISTS {IMPORT_FTS_TABLE}_insert",
    f"DROP TABLE IF EXISTS {IMPORT_FTS_TABLE}",
)


def search_import_texts(conn: Connection, query: TextQuery) -> list[int]:
    """Ids of import_texts rows holding every term, newest first: FTS5 trigram MATCH for
    terms of 3+ characters, LIKE (ASCII case-insensitive, like the index) for shorter."""
    ranked = query.ranked_terms
    likes = query.short_terms if ranked else list(query.terms)
    where = [f"t.text LIKE :like_{i} ESCAPE '\\'" for i in range(len(likes))]
    params: dict[str, Any] = {"limit": query.limit, "offset": query.offset}
    params.update({f"like_{i}": like_pattern(term) for i, term in enumerate(likes)})
    source = "import_texts AS t"
    if ranked:
        source = f"{IMPORT_FTS_TABLE} JOIN import_texts AS t ON t.id = {IMPORT_FTS_TABLE}.rowid"
        where.insert(0, f"{IMPORT_FTS_TABLE} MATCH :match")
        params["match"] = fts_query(ranked)
    sql = (
        f"SELECT t.id FROM {source} WHERE {' AND '.join(where) or '1'} "
        f"ORDER BY t.timestamp DESC, t.id DESC LIMIT :limit OFFSET :offset"
    )
    return [int(row.id) for row in conn.execute(sa.text(sql), params)]
