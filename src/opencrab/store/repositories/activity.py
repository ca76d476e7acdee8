"""Read-only counts of what an agent did in a period, across aggregates (memory logs,
session messages, heartbeat decisions): the usage analytics' figures.

These queries only read; each table keeps its one writer in its own repository.

Example:
    with db.read() as conn:
        logs = log_counts(conn, agent_id, since=None)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import heartbeat_log, memory_sessions, messages, sessions


def _after(column: Any, since: datetime | None) -> Any:
    return sa.true() if since is None else column >= since


def session_count(conn: Connection, agent_id: str, *, since: datetime | None) -> int:
    """How many sessions the agent's memory logs name in the period."""
    m = memory_sessions.c
    query = sa.select(sa.func.count(sa.distinct(m.session_id))).where(
        m.agent_id == agent_id, _after(m.created_at, since)
    )
    return int(conn.execute(query).scalar_one())


def message_counts(conn: Connection, agent_id: str, *, since: datetime | None) -> dict[str, int]:
    """The agent's session messages in the period, by role."""
    s, msg = sessions.c, messages.c
    rows = conn.execute(
        sa.select(msg.role, sa.func.count())
        .join(sessions, s.id == msg.session_id)
        .where(s.agent_id == agent_id, _after(msg.timestamp, since))
        .group_by(msg.role)
    )
    return {str(role): int(n) for role, n in rows}


def log_counts(conn: Connection, agent_id: str, *, since: datetime | None) -> dict[str, int]:
    """The agent's memory log lines in the period, by log type."""
    m = memory_sessions.c
    rows = conn.execute(
        sa.select(m.log_type, sa.func.count())
        .where(m.agent_id == agent_id, _after(m.created_at, since))
        .group_by(m.log_type)
    )
    return {str(kind): int(n) for kind, n in rows}


def heartbeat_counts(conn: Connection, agent_id: str, *, since: datetime | None) -> dict[str, int]:
    """The agent's heartbeat ticks in the period, by decision."""
    h = heartbeat_log.c
    rows = conn.execute(
        sa.select(h.decision, sa.func.count())
        .where(h.agent_id == agent_id, _after(h.created_at, since))
        .group_by(h.decision)
    )
    return {str(decision): int(n) for decision, n in rows}


def action_metadata(conn: Connection, agent_id: str, *, since: datetime | None) -> Iterator[Any]:
    """The metadata of the agent's action log lines in the period (JSON values)."""
    m = memory_sessions.c
    query = sa.select(m.metadata_json).where(
        m.agent_id == agent_id, m.log_type == "action", _after(m.created_at, since)
    )
    for (meta,) in conn.execute(query):
        yield meta
