"""The agent-mode session index (`agent_mode_sessions`): the one module that reads and
writes that table.

Each row mirrors one session file (opencrab.agentmode.files, the source of truth):
rewritten whenever the file is saved (`put`), all rebuilt from the files by `replace_all`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store import dialects
from opencrab.store.tables import agent_mode_sessions as table

TASK_STATES = ("pending", "ready", "running", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class AgentModeSessionRow:
    """One indexed session: where, what, how far (task counts by state), when."""

    id: str
    repository_path: str
    status: str  # the seed's SessionStatus name: Active, Paused, Completed, Failed
    title: str
    request: str
    file_path: str
    tasks_total: int
    task_counts: dict[str, int]  # lower-case TaskStatus name → count
    created_at: datetime
    updated_at: datetime


def _row(row: Any) -> AgentModeSessionRow:
    return AgentModeSessionRow(
        id=row.id,
        repository_path=row.repository_path,
        status=row.status,
        title=row.title,
        request=row.request,
        file_path=row.file_path,
        tasks_total=row.tasks_total,
        task_counts={state: getattr(row, f"tasks_{state}") for state in TASK_STATES},
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _values(record: AgentModeSessionRow) -> dict[str, Any]:
    counts = {f"tasks_{s}": int(record.task_counts.get(s, 0)) for s in TASK_STATES}
    return {
        "id": record.id,
        "repository_path": record.repository_path,
        "status": record.status,
        "title": record.title,
        "request": record.request,
        "file_path": record.file_path,
        "tasks_total": record.tasks_total,
        **counts,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def put(conn: Connection, record: AgentModeSessionRow) -> None:
    """Insert or overwrite the session's row."""
    conn.execute(dialects.upsert(conn.dialect, table, ("id",), **_values(record)))


def get(conn: Connection, session_id: str) -> AgentModeSessionRow | None:
    """The indexed session with this id, or None."""
    row = conn.execute(sa.select(table).where(table.c.id == session_id)).first()
    return None if row is None else _row(row)


def list_sessions(
    conn: Connection,
    *,
    status: str | None = None,
    repository_path: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[AgentModeSessionRow]:
    """Indexed sessions, most recently updated first; `status` and the repository narrow it."""
    query = sa.select(table)
    if status is not None:
        query = query.where(table.c.status == status)
    if repository_path is not None:
        query = query.where(table.c.repository_path == repository_path)
    query = query.order_by(table.c.updated_at.desc(), table.c.id).limit(limit).offset(offset)
    return [_row(row) for row in conn.execute(query)]


def count(conn: Connection, *, status: str | None = None) -> int:
    """How many sessions are indexed (with this status)."""
    query = sa.select(sa.func.count()).select_from(table)
    if status is not None:
        query = query.where(table.c.status == status)
    return int(conn.execute(query).scalar_one())


def delete(conn: Connection, session_id: str) -> bool:
    """Drop a session's row; False when there was none."""
    return conn.execute(table.delete().where(table.c.id == session_id)).rowcount > 0


def replace_all(conn: Connection, records: Iterable[AgentModeSessionRow]) -> int:
    """Make the index exactly `records` (rows of sessions without a file go); returns
    how many rows it holds."""
    kept = list(records)
    ids = [r.id for r in kept]
    stale = table.delete()
    if ids:
        stale = stale.where(table.c.id.not_in(ids))
    conn.execute(stale)
    for record in kept:
        put(conn, record)
    return len(kept)
