"""The memory vector repository: `memory_embeddings` and `memory_embedders` (issue 35).

The only code that reads and writes them. A vector is stored per session log line and
embedder name as float32 bytes; the embedder an agent's memory is indexed with now, with
the last indexing pass's error, is one `memory_embedders` row. The searching itself is
done in process over what `vectors_since` returns (core/memory_vectors.py).

Example:
    with db.write() as conn:
        save_vectors(conn, agent_id, "opencrab/multilingual-e5-small", [(log_id, blob)], 384)
    count_embedded(db, agent_id, "opencrab/multilingual-e5-small")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store import Database
from opencrab.store.tables import agents, memory_embedders, memory_embeddings, memory_sessions


@dataclass(frozen=True)
class EmbedderState:
    """The embedder an agent's memory is indexed with, and how the last pass went."""

    agent_id: str
    model: str
    dim: int | None
    error: str | None
    updated_at: datetime


@dataclass(frozen=True)
class PendingLine:
    """A session log line that has no vector of the agent's embedder yet."""

    id: int
    content: str


def agent_ids(db: Database) -> list[str]:
    """Every agent's id (the indexer's round)."""
    with db.read() as conn:
        return [str(r[0]) for r in conn.execute(sa.select(agents.c.id).order_by(agents.c.id))]


def pending_lines(
    db: Database, agent_id: str, model: str, *, after: int = 0, limit: int = 64
) -> list[PendingLine]:
    """Up to `limit` of the agent's lines (id > `after`, oldest first) with no `model`
    vector: new lines, lines written before vectors existed, or all after a model change."""
    m, e = memory_sessions.c, memory_embeddings.c
    has_vector = sa.exists().where(e.log_id == m.id, e.model == model)
    query = (
        sa.select(m.id, m.content)
        .where(m.agent_id == agent_id, m.id > after, ~has_vector)
        .order_by(m.id)
        .limit(limit)
    )
    with db.read() as conn:
        return [PendingLine(int(r.id), str(r.content)) for r in conn.execute(query)]


def save_vectors(
    conn: Connection,
    agent_id: str,
    model: str,
    vectors: Sequence[tuple[int, bytes]],
    dim: int,
) -> int:
    """Store (log id, float32 bytes) vectors of `model` in `conn`'s transaction; a line
    deleted meanwhile or already embedded is skipped. Returns how many were stored."""
    if not vectors:
        return 0
    m, e = memory_sessions.c, memory_embeddings.c
    ids = [log_id for log_id, _ in vectors]
    # by primary key alone (with the agent in the WHERE clause SQLite would walk the
    # agent's index); the agent is checked on the rows found
    live = {
        int(r.id)
        for r in conn.execute(sa.select(m.id, m.agent_id).where(m.id.in_(ids)))
        if r.agent_id == agent_id
    }
    embedded = sa.select(e.log_id).where(e.log_id.in_(ids), e.model == model)
    done = {int(r[0]) for r in conn.execute(embedded)}
    rows = [
        {"log_id": log_id, "agent_id": agent_id, "model": model, "dim": dim, "vector": blob}
        for log_id, blob in vectors
        if log_id in live and log_id not in done
    ]
    if rows:
        conn.execute(memory_embeddings.insert(), rows)
    return len(rows)


def drop_other_models(conn: Connection, agent_id: str, model: str) -> int:
    """Forget the agent's vectors of every embedder but `model` (after a model change
    has re-embedded everything). Returns how many went."""
    e = memory_embeddings.c
    done = conn.execute(memory_embeddings.delete().where(e.agent_id == agent_id, e.model != model))
    return int(done.rowcount or 0)


def vectors_since(
    db: Database, agent_id: str, model: str, after_seq: int
) -> list[tuple[int, int, bytes]]:
    """The agent's `model` vectors stored after `after_seq`: (seq, log id, bytes), by seq."""
    e = memory_embeddings.c
    query = (
        sa.select(e.seq, e.log_id, e.vector)
        .where(e.agent_id == agent_id, e.model == model, e.seq > after_seq)
        .order_by(e.seq)
    )
    with db.read() as conn:
        return [(int(r.seq), int(r.log_id), bytes(r.vector)) for r in conn.execute(query)]


def count_embedded(db: Database, agent_id: str, model: str) -> int:
    """How many of the agent's lines have a `model` vector."""
    e = memory_embeddings.c
    with db.read() as conn:
        query = sa.select(sa.func.count()).where(e.agent_id == agent_id, e.model == model)
        return int(conn.execute(query).scalar_one())


def count_lines(db: Database, agent_id: str) -> int:
    """How many session log lines the agent has."""
    m = memory_sessions.c
    with db.read() as conn:
        query = sa.select(sa.func.count()).where(m.agent_id == agent_id)
        return int(conn.execute(query).scalar_one())


def lines_matching(
    db: Database,
    agent_id: str,
    session_id: str | None,
    log_types: Sequence[str],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> set[int]:
    """The ids of the agent's lines in `session_id`, of `log_types` and written in
    [since, until) (each when given)."""
    m = memory_sessions.c
    query = sa.select(m.id).where(m.agent_id == agent_id)
    if since is not None:
        query = query.where(m.created_at >= since)
    if until is not None:
        query = query.where(m.created_at < until)
    if session_id is not None:
        query = query.where(m.session_id == session_id)
    if log_types:
        query = query.where(m.log_type.in_(list(log_types)))
    with db.read() as conn:
        return {int(r[0]) for r in conn.execute(query)}


def embedder_state(db: Database, agent_id: str) -> EmbedderState | None:
    """The agent's `memory_embedders` row, None before the indexer first saw the agent."""
    with db.read() as conn:
        row = conn.execute(
            sa.select(memory_embedders).where(memory_embedders.c.agent_id == agent_id)
        ).first()
    if row is None:
        return None
    return EmbedderState(
        agent_id=str(row.agent_id),
        model=str(row.model),
        dim=row.dim,
        error=row.error,
        updated_at=row.updated_at,
    )


def set_embedder_state(
    conn: Connection, agent_id: str, model: str, *, dim: int | None, error: str | None
) -> None:
    """Write the agent's embedder, its dimension (None: not known yet) and the last error."""
    values = {"model": model, "dim": dim, "error": error, "updated_at": datetime.now(UTC)}
    c = memory_embedders.c
    done = conn.execute(memory_embedders.update().where(c.agent_id == agent_id).values(values))
    if not done.rowcount:
        conn.execute(memory_embedders.insert().values(agent_id=agent_id, **values))
