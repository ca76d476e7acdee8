"""Tickets with their steps and sessions (seed 002): the only SQL over `tickets` and `steps`.
It reads a ticket's sessions; they are written by the sessions repository
(`sessions.insert_ticket_session`, `sessions.set_ticket_session_status`), the one
writer of `sessions`.

Every function takes the caller's connection, so a state change, its session's change
and anything written with them (a person's answer) share one transaction; the ticket
row is locked first (`FOR UPDATE` on PostgreSQL, `BEGIN IMMEDIATE` on SQLite), so two
processes changing one ticket take turns. The state rules themselves live in
`opencrab.tickets.states`; this module stores what they decide.

Example:
    with db.write() as conn:
        ticket = lock_ticket(conn, ticket_id)
        set_ticket_status(conn, ticket_id, "running")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import uuid4

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.errors import NotFoundError
from opencrab.store.prepared import Prepared
from opencrab.store.signals import TICKETS, signal
from opencrab.store.tables import agents, sessions, steps, tickets
from opencrab.store.types import utcnow


@dataclass(frozen=True)
class StepRecord:
    """One step of a ticket: seed 002's `steps` row (`idx` is its `index`)."""

    index: int
    title: str
    status: str
    result: Any
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TicketSummaryRecord:
    """A ticket as lists show it, with its agent's name."""

    id: str
    agent_id: str
    agent_name: str
    status: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TicketRecord(TicketSummaryRecord):
    """A whole ticket: params, context, error message, steps in index order and its
    current session (None while it is pending: no run has started since the last reset)."""

    params: dict[str, Any]
    context: dict[str, Any]
    error_message: str | None
    steps: list[StepRecord]
    current_session_id: str | None


@dataclass(frozen=True)
class TicketOverview:
    """What a list shows of a ticket besides its summary: its goal and step progress."""

    goal: str | None
    step_count: int
    steps_completed: int


@dataclass(frozen=True)
class TicketSessionRecord:
    """A ticket's session: id, status, and the ticket and agent it runs for."""

    id: str
    ticket_id: str
    agent_id: str
    status: str


_SUMMARY = (
    tickets.c.id,
    tickets.c.agent_id,
    agents.c.name.label("agent_name"),
    tickets.c.status,
    tickets.c.created_at,
    tickets.c.updated_at,
)


def _summary(row: Any) -> TicketSummaryRecord:
    return TicketSummaryRecord(
        id=str(row.id),
        agent_id=str(row.agent_id),
        agent_name=row.agent_name,
        status=row.status,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def agent_id_of(conn: Connection, agent_id: str) -> str | None:
    """The agent's id if an agent with this id exists, else None."""
    found = conn.execute(sa.select(agents.c.id).where(agents.c.id == agent_id)).scalar()
    return None if found is None else str(found)


def count_agent_tickets(conn: Connection, agent_id: str) -> int:
    """How many tickets the agent has (they keep it from being deleted: seed 002's
    `tickets.agent_id` has no cascade)."""
    query = sa.select(sa.func.count()).select_from(tickets).where(tickets.c.agent_id == agent_id)
    return int(conn.execute(query).scalar() or 0)


def insert_ticket(
    conn: Connection, agent_id: str, params: dict[str, Any], context: dict[str, Any]
) -> str:
    """A new `pending` ticket for an existing agent; returns its id. Schedulers are
    woken when it commits (store/signals.py)."""
    ticket_id = str(uuid4())
    now = utcnow()
    conn.execute(
        tickets.insert().values(
            id=ticket_id,
            agent_id=agent_id,
            status="pending",
            params=params,
            context=context,
            error_message=None,
            created_at=now,
            updated_at=now,
        )
    )
    signal(conn, TICKETS)
    return ticket_id


def lock_ticket(conn: Connection, ticket_id: str) -> TicketSummaryRecord:
    """The ticket's row, locked for the rest of the transaction; NotFoundError if none."""
    row = _LOCKED.first(conn, ticket_id=ticket_id)
    if row is None:
        raise NotFoundError(f"no ticket {ticket_id}")
    return _summary(row)


def ticket(conn: Connection, ticket_id: str) -> TicketRecord:
    """The whole ticket with its steps in index order; NotFoundError if there is none."""
    row = _WHOLE.first(conn, ticket_id=ticket_id)
    if row is None:
        raise NotFoundError(f"no ticket {ticket_id}")
    base = _summary(row)
    current = None if base.status == "pending" else newest_session(conn, ticket_id)
    return TicketRecord(
        **base.__dict__,
        params=row.params if isinstance(row.params, dict) else {},
        context=row.context if isinstance(row.context, dict) else {},
        error_message=row.error_message,
        steps=ticket_steps(conn, ticket_id),
        current_session_id=None if current is None else current.id,
    )


# the reads a ticket's run makes, compiled once (store/prepared.py)
_BY_ID = tickets.c.id == sa.bindparam("ticket_id")
_LOCKED = Prepared(
    sa.select(*_SUMMARY)
    .join(agents, agents.c.id == tickets.c.agent_id)
    .where(_BY_ID)
    .with_for_update(of=tickets)
)
_WHOLE = Prepared(
    sa.select(*_SUMMARY, tickets.c.params, tickets.c.context, tickets.c.error_message)
    .join(agents, agents.c.id == tickets.c.agent_id)
    .where(_BY_ID)
)


@dataclass(frozen=True)
class TicketState:
    """Where a ticket stands: its status and current session (as TicketRecord has them)."""

    status: str
    current_session_id: str | None


def ticket_state(conn: Connection, ticket_id: str) -> TicketState | None:
    """The ticket's status and current session (None while pending, as `ticket` has it)
    in one statement; None when there is no such ticket."""
    row = _STATE.first(conn, ticket_id=ticket_id)
    if row is None:
        return None
    pending = row.status == "pending" or row.session_id is None
    return TicketState(row.status, None if pending else str(row.session_id))


_NEWEST_ID = (
    sa.select(sessions.c.id)
    .where(sessions.c.ticket_id == tickets.c.id, sessions.c.kind == "ticket")
    .order_by(sessions.c.created_at.desc(), sessions.c.id.desc())
    .limit(1)
    .correlate(tickets)
    .scalar_subquery()
)
_STATE = Prepared(sa.select(tickets.c.status, _NEWEST_ID.label("session_id")).where(_BY_ID))


def list_tickets(
    conn: Connection,
    *,
    status: str | None = None,
    agent_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[TicketSummaryRecord]:
    """Tickets, newest first, optionally only those in `status` or of `agent_id`."""
    query = sa.select(*_SUMMARY).join(agents, agents.c.id == tickets.c.agent_id)
    if status is not None:
        query = query.where(tickets.c.status == status)
    if agent_id is not None:
        query = query.where(tickets.c.agent_id == agent_id)
    query = query.order_by(tickets.c.created_at.desc(), tickets.c.id.desc())
    return [_summary(r) for r in conn.execute(query.limit(limit).offset(offset))]


def ticket_ids_in(conn: Connection, status: str, *, limit: int = 100) -> list[str]:
    """Ids of the tickets in `status`, least recently updated first."""
    query = (
        sa.select(tickets.c.id)
        .where(tickets.c.status == status)
        .order_by(tickets.c.updated_at, tickets.c.id)
        .limit(limit)
    )
    return [str(found) for found in conn.execute(query).scalars()]


def ticket_overviews(conn: Connection, ticket_ids: list[str]) -> dict[str, TicketOverview]:
    """Each listed ticket's goal (its context's `goal` when that is text) and how many of
    its steps there are and are completed, by ticket id (two queries for the whole list)."""
    if not ticket_ids:
        return {}
    contexts = conn.execute(
        sa.select(tickets.c.id, tickets.c.context).where(tickets.c.id.in_(ticket_ids))
    )
    done = sa.func.sum(sa.case((steps.c.status == "completed", 1), else_=0))
    counts = {
        str(row.ticket_id): (int(row.total), int(row.done or 0))
        for row in conn.execute(
            sa.select(steps.c.ticket_id, sa.func.count().label("total"), done.label("done"))
            .where(steps.c.ticket_id.in_(ticket_ids))
            .group_by(steps.c.ticket_id)
        )
    }
    found = {}
    for row in contexts:
        goal = row.context.get("goal") if isinstance(row.context, dict) else None
        total, completed = counts.get(str(row.id), (0, 0))
        found[str(row.id)] = TicketOverview(
            goal if isinstance(goal, str) and goal.strip() else None, total, completed
        )
    return found


def delete_ticket(conn: Connection, ticket_id: str) -> None:
    """Delete the ticket; its steps, sessions and their messages go with it (the foreign
    keys cascade). The sessions' events stay in the event log. NotFoundError if none."""
    if conn.execute(tickets.delete().where(tickets.c.id == ticket_id)).rowcount == 0:
        raise NotFoundError(f"no ticket {ticket_id}")


def set_ticket_status(
    conn: Connection, ticket_id: str, status: str, *, error_message: str | None = None
) -> None:
    """Store the ticket's new status (and its error message: None clears it)."""
    _SET_STATUS.run(
        conn, ticket_id=ticket_id, t_status=status, t_error=error_message, t_now=utcnow()
    )


_SET_STATUS = Prepared(
    tickets.update()
    .where(_BY_ID)
    .values(
        status=sa.bindparam("t_status"),
        error_message=sa.bindparam("t_error"),
        updated_at=sa.bindparam("t_now", type_=tickets.c.updated_at.type),
    )
)


# ------------------------------------------------------------------ sessions of a ticket
def _session(row: Any) -> TicketSessionRecord:
    return TicketSessionRecord(
        id=str(row.id), ticket_id=str(row.ticket_id), agent_id=str(row.agent_id), status=row.status
    )


_SESSION = (sessions.c.id, sessions.c.ticket_id, sessions.c.agent_id, sessions.c.status)


_NEWEST_SESSION = Prepared(
    sa.select(*_SESSION)
    .where(sessions.c.ticket_id == sa.bindparam("ticket_id"), sessions.c.kind == "ticket")
    .order_by(sessions.c.created_at.desc(), sessions.c.id.desc())
    .limit(1)
)
_TICKET_SESSION = Prepared(
    sa.select(*_SESSION).where(
        sessions.c.id == sa.bindparam("session_id"), sessions.c.kind == "ticket"
    )
)


def newest_session(conn: Connection, ticket_id: str) -> TicketSessionRecord | None:
    """The ticket's most recently started session, if it has any."""
    row = _NEWEST_SESSION.first(conn, ticket_id=ticket_id)
    return None if row is None else _session(row)


def ticket_session(conn: Connection, session_id: str) -> TicketSessionRecord | None:
    """The session if it is a ticket's session, else None (chat, discussion, or none)."""
    row = _TICKET_SESSION.first(conn, session_id=session_id)
    return None if row is None else _session(row)


# ------------------------------------------------------------------ steps
def _step(row: Any) -> StepRecord:
    return StepRecord(
        index=row.idx,
        title=row.title,
        status=row.status,
        result=row.result,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


_STEP = (
    steps.c.idx,
    steps.c.title,
    steps.c.status,
    steps.c.result,
    steps.c.created_at,
    steps.c.updated_at,
)


def ticket_steps(conn: Connection, ticket_id: str) -> list[StepRecord]:
    """The ticket's steps in index order."""
    return [_step(r) for r in _STEPS.rows(conn, ticket_id=ticket_id)]


_STEPS = Prepared(
    sa.select(*_STEP).where(steps.c.ticket_id == sa.bindparam("ticket_id")).order_by(steps.c.idx)
)


def insert_step(conn: Connection, ticket_id: str, title: str, status: str) -> StepRecord:
    """A new step after the ticket's last one (indexes count from 0)."""
    last = conn.execute(
        sa.select(sa.func.max(steps.c.idx)).where(steps.c.ticket_id == ticket_id)
    ).scalar()
    index = 0 if last is None else int(last) + 1
    now = utcnow()
    conn.execute(
        steps.insert().values(
            ticket_id=ticket_id,
            idx=index,
            title=title,
            status=status,
            result=None,
            created_at=now,
            updated_at=now,
        )
    )
    return StepRecord(index, title, status, None, now, now)


def update_step(
    conn: Connection,
    ticket_id: str,
    index: int,
    *,
    status: str | None = None,
    result: Any = None,
    set_result: bool = False,
) -> StepRecord:
    """Change a step's status and/or result (`set_result`: store `result`, None included);
    NotFoundError when the ticket has no step `index`."""
    values: dict[str, Any] = {"updated_at": utcnow()}
    if status is not None:
        values["status"] = status
    if set_result:
        values["result"] = result
    where = sa.and_(steps.c.ticket_id == ticket_id, steps.c.idx == index)
    if conn.execute(steps.update().where(where).values(**values)).rowcount == 0:
        raise NotFoundError(f"ticket {ticket_id} has no step {index}")
    return _step(conn.execute(sa.select(*_STEP).where(where)).one())


def touch_ticket(conn: Connection, ticket_id: str) -> None:
    """Mark the ticket as updated now (a step of it changed)."""
    conn.execute(tickets.update().where(tickets.c.id == ticket_id).values(updated_at=utcnow()))
