"""A2A tasks backed by tickets (`a2a_tasks`): the one writer of that table.

The task's id is its ticket's; the row keeps the caller's contextId and, once the task
was canceled over A2A, who canceled it (opencrab.a2a.server_tasks reads the rest from
the ticket).

Example:
    with db.write() as conn:
        insert_task(conn, ticket_id, agent_id, "ctx-1", now)
        mark_canceled(conn, ticket_id, "local")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import a2a_tasks as table
from opencrab.store.tables import tickets


@dataclass(frozen=True)
class A2aTaskRow:
    """A ticket-backed task: its ticket (the task's id), agent, contextId, who canceled it."""

    ticket_id: str
    agent_id: str
    context_id: str
    canceled_by: str | None
    created_at: datetime


def _row(row: sa.Row[tuple[object, ...]]) -> A2aTaskRow:
    return A2aTaskRow(
        ticket_id=str(row.ticket_id),
        agent_id=str(row.agent_id),
        context_id=str(row.context_id),
        canceled_by=row.canceled_by,
        created_at=row.created_at,
    )


def insert_task(
    conn: Connection, ticket_id: str, agent_id: str, context_id: str, now: datetime
) -> None:
    """Record the ticket as an A2A task in `context_id`."""
    conn.execute(
        table.insert().values(
            ticket_id=ticket_id, agent_id=agent_id, context_id=context_id, created_at=now
        )
    )


def task(conn: Connection, ticket_id: str) -> A2aTaskRow | None:
    """The task of that ticket, if it is one."""
    found = conn.execute(sa.select(table).where(table.c.ticket_id == ticket_id)).first()
    return None if found is None else _row(found)


def tasks(
    conn: Connection,
    agent_id: str,
    *,
    context_id: str | None = None,
    ticket_status: str | None = None,
    canceled: bool | None = None,
    updated_after: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[A2aTaskRow], int]:
    """The agent's tasks, newest first, and how many match in all: `context_id`, the
    ticket's status, whether it was canceled and its last change after `updated_after`
    narrow them."""
    where = [table.c.agent_id == agent_id]
    if context_id is not None:
        where.append(table.c.context_id == context_id)
    if ticket_status is not None:
        where.append(tickets.c.status == ticket_status)
    if canceled is not None:
        by = table.c.canceled_by
        where.append(by.is_not(None) if canceled else by.is_(None))
    if updated_after is not None:
        where.append(tickets.c.updated_at > updated_after)
    joined = table.join(tickets, tickets.c.id == table.c.ticket_id)
    rows = conn.execute(
        sa.select(table)
        .select_from(joined)
        .where(*where)
        .order_by(table.c.created_at.desc(), table.c.ticket_id)
        .limit(limit)
        .offset(offset)
    ).all()
    total = conn.execute(sa.select(sa.func.count()).select_from(joined).where(*where)).scalar_one()
    return [_row(r) for r in rows], int(total)


def mark_canceled(conn: Connection, ticket_id: str, by: str) -> None:
    """Record that the task was canceled over A2A, by whom."""
    conn.execute(table.update().where(table.c.ticket_id == ticket_id).values(canceled_by=by))
