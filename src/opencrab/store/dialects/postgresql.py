"""PostgreSQL specifics: engine options, read snapshots, and memory search over the trigram
index of memory logs."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from opencrab.store.dialects import MemoryQuery, like_pattern

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


BM25_K1 = 1.2
BM25_B = 0.75
"""FTS5's bm25 constants: PostgreSQL ranks memory search hits with the same formula."""


def _bm25_term(i: int) -> str:
    """bm25's part for term `i`: idf (from the agent's lines, clamped at 1e-6 as in FTS5)
    times the term's saturated frequency in the line, normalised by the line's length."""
    tf = (
        f"(CAST(char_length(lower(m.content)) - char_length(replace(lower(m.content), "
        f"lower(:term_{i}), '')) AS double precision) / char_length(:term_{i}))"
    )
    idf = f"greatest(ln((s.n - s.df_{i} + 0.5) / (s.df_{i} + 0.5)), 1e-6)"
    norm = f"{BM25_K1} * (1 - {BM25_B} + {BM25_B} * char_length(m.content) / greatest(s.avglen, 1))"
    return f"{idf} * {tf} * {BM25_K1 + 1} / ({tf} + {norm})"


def search_memory_sql(*, ranked: int, with_session: bool, log_types: int, terms: int) -> str:
    """SQL finding an agent's session log lines containing every term (ILIKE, served by
    the trigram index); the first `ranked` terms score the hits with bm25, else newest first.

    Parameters: :agent_id, :limit, :like_0.. (ILIKE patterns, `\\` escaping) for `terms`,
    :term_0.. (the raw text) for the `ranked` ones, :session_id when `with_session`,
    :log_type_0.. for `log_types`.
    """
    where = ["m.agent_id = :agent_id"]
    if with_session:
        where.append("m.session_id = :session_id")
    if log_types:
        names = ", ".join(f":log_type_{i}" for i in range(log_types))
        where.append(f"m.log_type IN ({names})")
    where += [f"m.content ILIKE :like_{i} ESCAPE '\\'" for i in range(terms)]
    if not ranked:
        return (
            f"SELECT m.id, 0.0 AS score FROM memory_sessions AS m "
            f"WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT :limit"
        )
    counts = "".join(
        f", count(*) FILTER (WHERE content ILIKE :like_{i} ESCAPE '\\') AS df_{i}"
        for i in range(ranked)
    )
    score = " + ".join(_bm25_term(i) for i in range(ranked))
    return (
        f"WITH s AS (SELECT count(*) AS n, avg(char_length(content)) AS avglen{counts} "
        f"FROM memory_sessions WHERE agent_id = :agent_id) "
        f"SELECT m.id, {score} AS score FROM memory_sessions AS m CROSS JOIN s "
        f"WHERE {' AND '.join(where)} ORDER BY score DESC, m.id DESC LIMIT :limit"
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
    return [(int(r.id), float(r.score)) for r in conn.execute(sa.text(sql), params)]
