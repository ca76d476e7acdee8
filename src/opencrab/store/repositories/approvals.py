"""Tool calls waiting for a person (`pending_approvals`): the one module that reads and
writes that table (opencrab.core.approvals decides what goes in it).

A decision is taken by a conditional update (`claim`: only a `pending` row changes), so
of two people approving one call at once exactly one wins and runs it.

A decision may also ask for a follow-up: the turn that continues its session
(core/approval_followups.py). `request_follow_up` records it in the decision's own
transaction (`follow_up` "pending", and `answered_by` on every decision of the session it
answers); `due_follow_ups` lists those to run, `finish_follow_up` settles one once (a
conditional update, as `claim`), and `answered` tells a waiting gateway which decisions'
follow-ups have finished, whichever process ran them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import pending_approvals as table

ApprovalStatus = Literal["pending", "approved", "denied"]
FollowUpStatus = Literal["pending", "done", "dropped"]


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
    follow_up: FollowUpStatus | None = None  # the turn continuing the session after it


@dataclass(frozen=True)
class FollowUpOutcome:
    """A finished follow-up: done (its turn's closing steps, in step_json form) or dropped
    (nothing ran: the session ended, the agent was deleted)."""

    approval_id: str
    session_id: str
    status: FollowUpStatus
    steps: list[dict[str, Any]]


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
        follow_up=row.follow_up,
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


# ------------------------------------------------------------------ follow-ups
def request_follow_up(conn: Connection, approval_id: str, session_id: str) -> None:
    """Ask for the turn that continues the session after `approval_id`'s decision, and
    name it as the answer of every decision of the session not answered yet (in the
    decision's transaction; the caller checked no call of the session still waits)."""
    conn.execute(table.update().where(table.c.id == approval_id).values(follow_up="pending"))
    conn.execute(
        table.update()
        .where(
            table.c.session_id == session_id,
            table.c.status != "pending",
            table.c.answered_by.is_(None),
        )
        .values(answered_by=approval_id)
    )


def due_follow_ups(conn: Connection, *, limit: int = 100) -> list[str]:
    """The approvals whose follow-up waits to run, oldest decision first."""
    query = (
        sa.select(table.c.id)
        .where(table.c.follow_up == "pending")
        .order_by(table.c.decided_at, table.c.id)
        .limit(limit)
    )
    return [str(found) for found in conn.execute(query).scalars()]


def finish_follow_up(
    conn: Connection,
    approval_id: str,
    status: Literal["done", "dropped"],
    steps: list[dict[str, Any]],
    *,
    at: datetime,
) -> bool:
    """Settle a pending follow-up; False when it was settled already (by any process)."""
    done = conn.execute(
        table.update()
        .where(table.c.id == approval_id, table.c.follow_up == "pending")
        .values(follow_up=status, follow_up_json=steps, followed_up_at=at)
    )
    return done.rowcount == 1


def answered(conn: Connection, approval_ids: list[str]) -> dict[str, FollowUpOutcome]:
    """Of `approval_ids`, those whose session's follow-up has finished: its outcome, by
    the waited approval's id."""
    if not approval_ids:
        return {}
    answer = table.alias("answer")
    query = (
        sa.select(table.c.id, answer.c.id.label("by"), answer.c.session_id)
        .add_columns(answer.c.follow_up, answer.c.follow_up_json)
        .join(answer, answer.c.id == table.c.answered_by)
        .where(table.c.id.in_(approval_ids), answer.c.follow_up.in_(("done", "dropped")))
    )
    return {
        str(row.id): FollowUpOutcome(
            str(row.by), str(row.session_id), row.follow_up, list(row.follow_up_json or [])
        )
        for row in conn.execute(query)
    }


def waiting_sessions(conn: Connection, session_ids: list[str]) -> set[str]:
    """Those of the sessions where a call waits for a person or its follow-up has not run."""
    if not session_ids:
        return set()
    query = (
        sa.select(table.c.session_id)
        .distinct()
        .where(
            table.c.session_id.in_(session_ids),
            sa.or_(table.c.status == "pending", table.c.follow_up == "pending"),
        )
    )
    return {str(found) for found in conn.execute(query).scalars()}


def session_waiting(conn: Connection, session_id: str) -> bool:
    """True while a call of the session waits for a person or its follow-up has not run."""
    return bool(waiting_sessions(conn, [session_id]))
