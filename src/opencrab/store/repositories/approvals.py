"""Tool calls waiting for a person (`pending_approvals`): the one module that reads and
writes that table (opencrab.core.approvals decides what goes in it).

A decision is taken by a conditional update (`claim`: only a `pending` row changes), so
of two people approving one call at once exactly one wins and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import pending_approvals as table

ApprovalStatus = Literal["pending", "approved", "denied"]


@dataclass(frozen=True)
class ApprovalRecord:
    """One held-back tool call and, once made, the person's decision."""

    id: str
    session_id: str
    agent_id: str
    trace_id: str
    tool_name: str
    arguments: Any
    call_id: str
    call_event_id: str
    status: ApprovalStatus
    created_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None
    result_event_id: str | None


def _record(row: Any) -> ApprovalRecord:
    return ApprovalRecord(
        id=str(row.id),
        session_id=str(row.session_id),
        agent_id=str(row.agent_id),
        trace_id=str(row.trace_id),
        tool_name=row.tool_name,
        arguments=row.arguments_json,
        call_id=row.call_id,
        call_event_id=str(row.call_event_id),
        status=row.status,
        created_at=row.created_at,
        decided_at=row.decided_at,
        decided_by=row.decided_by,
        reason=row.reason,
        result_event_id=None if row.result_event_id is None else str(row.result_event_id),
    )


def insert(conn: Connection, record: ApprovalRecord) -> None:
    """Store a new `pending` call (in the caller's transaction)."""
    conn.execute(
        table.insert().values(
            id=record.id,
            session_id=record.session_id,
            agent_id=record.agent_id,
            trace_id=record.trace_id,
            tool_name=record.tool_name,
            arguments_json=record.arguments,
            call_id=record.call_id,
            call_event_id=record.call_event_id,
            status="pending",
            created_at=record.created_at,
        )
    )


def get(conn: Connection, approval_id: str) -> ApprovalRecord | None:
    """The approval with this id, or None."""
    row = conn.execute(sa.select(table).where(table.c.id == approval_id)).first()
    return None if row is None else _record(row)


def list_approvals(
    conn: Connection,
    *,
    session_id: str | None = None,
    status: ApprovalStatus | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[ApprovalRecord]:
    """Approvals, oldest first; `session_id` and `status` narrow the list."""
    query = sa.select(table)
    if session_id is not None:
        query = query.where(table.c.session_id == session_id)
    if status is not None:
        query = query.where(table.c.status == status)
    query = query.order_by(table.c.created_at, table.c.id).limit(limit).offset(offset)
    return [_record(row) for row in conn.execute(query)]


def count_pending(conn: Connection, session_id: str) -> int:
    """How many calls of the session still wait for a decision."""
    query = sa.select(sa.func.count()).where(
        table.c.session_id == session_id, table.c.status == "pending"
    )
    return int(conn.execute(query).scalar_one())


def claim(
    conn: Connection,
    approval_id: str,
    decision: Literal["approved", "denied"],
    *,
    by: str,
    reason: str | None,
    at: datetime,
) -> bool:
    """Decide a `pending` approval; False when it was decided already (by anyone)."""
    done = conn.execute(
        table.update()
        .where(table.c.id == approval_id, table.c.status == "pending")
        .values(status=decision, decided_at=at, decided_by=by, reason=reason)
    )
    return done.rowcount == 1


def set_result(conn: Connection, approval_id: str, result_event_id: str) -> None:
    """Name the tool_result event the decision wrote."""
    conn.execute(
        table.update().where(table.c.id == approval_id).values(result_event_id=result_event_id)
    )
