"""The consolidation repository: which sessions ended with lines not yet put into memory,
and how far each was (`memory_consolidations`, core/consolidation.py).

A session's lines are consolidated up to a log line id (`last_log_id`); lines above it
are new. A session has ended when its latest line is older than the idle time, or when
its `sessions` row is no longer active (ended through the API, CLI or dashboard).

Example:
    for ended in ended_sessions(db, idle_before=now - idle, since=now - max_age, limit=20):
        ...
        record(db, ended.agent_id, ended.session_id, last_log_id=top, status="done", ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store import Database
from opencrab.store.dialects import upsert
from opencrab.store.tables import memory_consolidations, memory_sessions, sessions

ENDED_STATUSES = ("completed", "failed")


def consolidation_key(agent_id: str, session_id: str) -> str:
    """The lease a consolidation of one agent's lines of one session holds."""
    return f"consolidate:{agent_id}:{session_id}"


@dataclass(frozen=True)
class EndedSession:
    """A session of an agent whose lines above `done_upto` are not consolidated yet."""

    agent_id: str
    session_id: str
    last_log_id: int  # its latest line
    last_at: datetime  # when that line was written
    done_upto: int  # consolidated up to this line id (0: never)
    status: str | None  # its sessions row's status (None: no row, e.g. a heartbeat's)


@dataclass(frozen=True)
class Consolidation:
    """One `memory_consolidations` row."""

    agent_id: str
    session_id: str
    last_log_id: int
    status: str
    memories: int
    merged: int
    impressions: int
    detail: dict[str, Any]
    updated_at: datetime


def ended_sessions(
    db: Database, *, idle_before: datetime, since: datetime, limit: int
) -> list[EndedSession]:
    """Sessions with unconsolidated lines whose latest line is older than `idle_before`
    or whose session row has ended, and newer than `since` (older ones are left alone:
    no summary of last year's imported history on the first start), oldest first."""
    m = memory_sessions.c
    tops = (
        sa.select(m.agent_id, m.session_id, sa.func.max(m.id).label("top"))
        .group_by(m.agent_id, m.session_id)
        .subquery()
    )
    last = memory_sessions.alias("last")
    c = memory_consolidations.c
    query = (
        sa.select(
            tops.c.agent_id,
            tops.c.session_id,
            tops.c.top,
            last.c.created_at,
            sa.func.coalesce(c.last_log_id, 0).label("done_upto"),
            sessions.c.status,
        )
        .join(last, last.c.id == tops.c.top)
        .outerjoin(
            memory_consolidations,
            sa.and_(c.agent_id == tops.c.agent_id, c.session_id == tops.c.session_id),
        )
        .outerjoin(sessions, sessions.c.id == tops.c.session_id)
        .where(
            sa.or_(c.last_log_id.is_(None), tops.c.top > c.last_log_id),
            last.c.created_at >= since,
            sa.or_(last.c.created_at < idle_before, sessions.c.status.in_(ENDED_STATUSES)),
        )
        .order_by(last.c.created_at, tops.c.top)
        .limit(max(1, limit))
    )
    with db.read() as conn:
        rows = conn.execute(query).all()
    return [
        EndedSession(
            agent_id=str(r.agent_id),
            session_id=str(r.session_id),
            last_log_id=int(r.top),
            last_at=r.created_at,
            done_upto=int(r.done_upto),
            status=r.status,
        )
        for r in rows
    ]


def done_upto(db: Database, agent_id: str, session_id: str) -> int:
    """The line id the session's lines are consolidated up to (0: never)."""
    c = memory_consolidations.c
    with db.read() as conn:
        found = conn.execute(
            sa.select(c.last_log_id).where(c.agent_id == agent_id, c.session_id == session_id)
        ).scalar()
    return int(found or 0)


def latest_line(conn: Connection, agent_id: str, session_id: str) -> int:
    """The id of the session's latest line of the agent, in `conn`'s transaction."""
    m = memory_sessions.c
    found = conn.execute(
        sa.select(sa.func.max(m.id)).where(m.agent_id == agent_id, m.session_id == session_id)
    ).scalar()
    return int(found or 0)


def record(
    conn: Connection,
    agent_id: str,
    session_id: str,
    *,
    last_log_id: int,
    status: str,
    memories: int = 0,
    merged: int = 0,
    impressions: int = 0,
    detail: dict[str, Any] | None = None,
) -> None:
    """Write (or move on) how far the session's lines are consolidated, in `conn`'s
    transaction; a row never moves back (the higher `last_log_id` wins)."""
    now = datetime.now(UTC)
    c = memory_consolidations.c
    existing = conn.execute(
        sa.select(c.last_log_id).where(c.agent_id == agent_id, c.session_id == session_id)
    ).scalar()
    if existing is not None and int(existing) >= last_log_id:
        return
    conn.execute(
        upsert(
            conn.dialect,
            memory_consolidations,
            ["agent_id", "session_id"],
            agent_id=agent_id,
            session_id=session_id,
            last_log_id=last_log_id,
            status=status,
            memories=memories,
            merged=merged,
            impressions=impressions,
            detail_json=detail or {},
            created_at=now,
            updated_at=now,
        )
    )


def consolidations(db: Database, agent_id: str, *, limit: int = 50) -> list[Consolidation]:
    """The agent's consolidations, latest first."""
    c = memory_consolidations.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(memory_consolidations)
            .where(c.agent_id == agent_id)
            .order_by(c.updated_at.desc())
            .limit(max(1, limit))
        ).all()
    return [
        Consolidation(
            agent_id=str(r.agent_id),
            session_id=str(r.session_id),
            last_log_id=int(r.last_log_id),
            status=r.status,
            memories=int(r.memories),
            merged=int(r.merged),
            impressions=int(r.impressions),
            detail=r.detail_json or {},
            updated_at=r.updated_at,
        )
        for r in rows
    ]
