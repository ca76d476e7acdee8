"""What can be done to a ticket: create, read, list, delete, the moves of its state machine
(tickets/states.py) with their session changes, its steps, and a person's answer.

Each operation is one write transaction that locks the ticket row first, so a move and
its session's change happen together or not at all, and two processes moving one ticket
take turns (the second sees the first's result and is refused if its move no longer
applies).

The scheduler (tickets/scheduler.py) runs tickets through `start_ticket` — the seam: it moves a
`pending` ticket to `running` with a NEW session and returns it — and ends or pauses a
run with `suspend_ticket`, `complete_ticket` and `fail_ticket` (the ticket actions make
the same moves with `move_in`, inside their step's transaction). `resume_ticket` and a
person's answer (`answer_ticket_session`) put the SAME session back to `active` for the
scheduler to continue; `reset_ticket` archives it so the next `start_ticket` opens a new one.

Example:
    ticket = create_ticket(db, agent_id, params={"repo": "x"}, context={"goal": "review"})
    running = start_ticket(db, ticket.id)          # the scheduler's claim
    suspend_ticket(db, ticket.id)                  # the agent asked a person
    answer_ticket_session(db, running.current_session_id, "yes", sender_id="user")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy.engine import Connection

from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.sessions import Said, insert_messages
from opencrab.core.steps import SessionMessage
from opencrab.errors import NotFoundError, ValidationError
from opencrab.event_log import EventLog
from opencrab.events import MessageEvent, MessagePayload, UserEvent, UserPayload
from opencrab.messages import check_message
from opencrab.store import Database
from opencrab.store.leases import LeaseStore, ticket_key
from opencrab.store.repositories import sessions as sessions_repo
from opencrab.store.repositories import tickets as repo
from opencrab.store.repositories.tickets import (
    StepRecord,
    TicketOverview,
    TicketRecord,
    TicketSessionRecord,
    TicketState,
    TicketSummaryRecord,
)
from opencrab.store.signals import TICKETS, signal
from opencrab.store.types import utcnow
from opencrab.tickets.states import MoveName, StepStatus, TicketStatus, check_move

MAX_STEP_TITLE = 200  # seed 002: steps.title VARCHAR(200)
MAX_INPUT_BYTES = 64 * 1024
"""How big a ticket's `params` (and its `context`) may be, as compact JSON in UTF-8."""
MAX_INPUT_DEPTH = 16
"""How deeply a ticket's `params` (and its `context`) may nest objects and lists."""
WAKING_MOVES: frozenset[MoveName] = frozenset({"resume", "reset"})
"""Moves after which a scheduler has work: the ticket is `running` with no process on it
(resumed: by a person, an answer, a decided approval) or `pending` again (reset). They
and a new ticket signal store.signals.TICKETS when they commit."""


def _uuid(value: str, what: str) -> str:
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise ValidationError(f"{what} id {value!r} is not a UUID") from None


def create_ticket(
    db: Database,
    agent_id: str,
    *,
    params: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
) -> TicketRecord:
    """A new `pending` ticket for the agent (by id); NotFoundError when there is no such
    agent, ValidationError naming `params` or `context` when one is over MAX_INPUT_BYTES
    or nests deeper than MAX_INPUT_DEPTH (they go into the agent's first prompt)."""
    agent_id = _uuid(agent_id, "agent")
    _check_input("params", params or {})
    _check_input("context", context or {})
    with db.write() as conn:
        if repo.agent_id_of(conn, agent_id) is None:
            raise NotFoundError(f"no agent {agent_id}")
        ticket_id = repo.insert_ticket(conn, agent_id, params or {}, context or {})
        return repo.ticket(conn, ticket_id)


def _check_input(name: str, value: dict[str, Any]) -> None:
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_INPUT_BYTES:
        raise ValidationError(
            f"{name} is {size} bytes as JSON, over the limit of {MAX_INPUT_BYTES} bytes"
        )
    level: list[Any] = [value]  # the objects and lists one level down, each round
    for _ in range(MAX_INPUT_DEPTH):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return
    raise ValidationError(f"{name} nests deeper than {MAX_INPUT_DEPTH} levels of objects and lists")


def get_ticket(db: Database, ticket_id: str) -> TicketRecord:
    """The ticket with its steps in index order and its current session."""
    with db.read() as conn:
        return repo.ticket(conn, _uuid(ticket_id, "ticket"))


def ticket_state(db: Database, ticket_id: str) -> TicketState | None:
    """The ticket's status and current session (one short read); None when it is gone."""
    with db.read() as conn:
        return repo.ticket_state(conn, _uuid(ticket_id, "ticket"))


def list_tickets(
    db: Database,
    *,
    status: TicketStatus | None = None,
    agent_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[TicketSummaryRecord]:
    """Tickets, newest first; `status` and `agent_id` narrow the list."""
    with db.read() as conn:
        return repo.list_tickets(conn, status=status, agent_id=agent_id, limit=limit, offset=offset)


def ticket_overviews(db: Database, ticket_ids: list[str]) -> dict[str, TicketOverview]:
    """The listed tickets' goals and step progress, by ticket id (what a board card shows)."""
    with db.read() as conn:
        return repo.ticket_overviews(conn, ticket_ids)


def delete_ticket(db: Database, ticket_id: str) -> None:
    """Delete the ticket with its steps, sessions and messages; NotFoundError if none."""
    with db.write() as conn:
        repo.delete_ticket(conn, _uuid(ticket_id, "ticket"))


# ------------------------------------------------------------------ the state machine
def move_in(
    conn: Connection,
    ticket_id: str,
    move: MoveName,
    error: str | None = None,
    *,
    locked: TicketSummaryRecord | None = None,
) -> None:
    """Make `move` on the ticket (locked first, unless `locked` is its row this
    transaction already locked) and its session, in `conn`'s transaction
    (TicketStateError when it does not apply): the ticket actions' writes and the approval
    hooks join their step's transaction this way."""
    ticket = locked if locked is not None else repo.lock_ticket(conn, ticket_id)
    rule = check_move(ticket_id, ticket.status, move)
    if move == "start":
        sessions_repo.insert_ticket_session(conn, ticket_id, ticket.agent_id)
    else:
        session = repo.newest_session(conn, ticket_id)
        # only a live session moves: an ended one (a failed run's) stays as it ended
        if session is not None and session.status in ("active", "suspended"):
            sessions_repo.set_ticket_session_status(conn, session.id, rule.session)
    repo.set_ticket_status(conn, ticket_id, rule.target, error_message=error)
    if move in WAKING_MOVES:
        signal(conn, TICKETS)  # a scheduler picks it up at once, not at its next poll


def _moved(db: Database, ticket_id: str, move: MoveName, error: str | None = None) -> TicketRecord:
    ticket_id = _uuid(ticket_id, "ticket")
    with db.write() as conn:
        move_in(conn, ticket_id, move, error)
        return repo.ticket(conn, ticket_id)


def start_ticket(db: Database, ticket_id: str) -> TicketRecord:
    """The scheduler's seam: a `pending` ticket becomes `running` in a NEW `active` session
    (its `current_session_id`); TicketStateError from any other status."""
    return _moved(db, ticket_id, "start")


@dataclass(frozen=True)
class RunBegun:
    """A claimed ticket as its run begins: `started` when it was `pending` and this run
    started it (a new session), else it is as it was (running, or moved meanwhile)."""

    ticket: TicketRecord
    started: bool


def begin_run(db: Database, ticket_id: str) -> RunBegun:
    """The scheduler's claimed ticket as its run begins, in one write transaction: a
    `pending` one is started first (as `start_ticket`), any other is read as it is."""
    ticket_id = _uuid(ticket_id, "ticket")
    with db.write() as conn:
        locked = repo.lock_ticket(conn, ticket_id)
        started = locked.status == "pending"
        if started:
            move_in(conn, ticket_id, "start", locked=locked)
        return RunBegun(repo.ticket(conn, ticket_id), started)


def suspend_ticket(db: Database, ticket_id: str, reason: str | None = None) -> TicketRecord:
    """A `running` ticket waits for a person: ticket and session `suspended`; `reason`
    (a limit reached, …) is kept as its error message until it runs again."""
    return _moved(db, ticket_id, "suspend", reason)


def resume_ticket(db: Database, ticket_id: str) -> TicketRecord:
    """A `suspended` ticket runs on: ticket `running`, the SAME session `active` again
    (seed 002 GAP-001); TicketStateError (400) from any other status."""
    return _moved(db, ticket_id, "resume")


def reset_ticket(db: Database, ticket_id: str) -> TicketRecord:
    """Back to `pending` from any status: a live current session is archived as
    `completed` (a failed run's stays `failed`), the error message cleared, the steps
    kept; the next run starts a NEW session."""
    return _moved(db, ticket_id, "reset")


def complete_ticket(db: Database, ticket_id: str) -> TicketRecord:
    """A `running` ticket is done: ticket and session `completed`."""
    return _moved(db, ticket_id, "complete")


def fail_ticket(db: Database, ticket_id: str, reason: str) -> TicketRecord:
    """A running or suspended ticket failed: ticket and session `failed`, `reason` kept as
    its error message (GAP-008)."""
    if not reason.strip():
        raise ValidationError("a failed ticket needs a reason (its error message)")
    return _moved(db, ticket_id, "fail", reason.strip())


def runnable_tickets(db: Database, *, limit: int = 100) -> list[str]:
    """Ids of tickets a scheduler may claim, least recently updated first: `running` ones
    no process holds the lease of (resumed, or their process died), then `pending` ones
    (at most `limit` of each)."""
    with db.read() as conn:
        running = repo.ticket_ids_in(conn, "running", limit=limit)
        pending = repo.ticket_ids_in(conn, "pending", limit=limit)
    held = LeaseStore(db).live(ticket_key(t) for t in running)
    return [t for t in running if ticket_key(t) not in held] + pending


# ------------------------------------------------------------------ steps
def add_step_in(conn: Connection, ticket_id: str, title: str, status: StepStatus) -> StepRecord:
    """`add_step` in `conn`'s transaction."""
    title = title.strip()
    if not title or len(title) > MAX_STEP_TITLE:
        raise ValidationError(f"a step title has 1 to {MAX_STEP_TITLE} characters")
    repo.lock_ticket(conn, ticket_id)
    step = repo.insert_step(conn, ticket_id, title, status)
    repo.touch_ticket(conn, ticket_id)
    return step


def add_step(
    db: Database, ticket_id: str, title: str, *, status: StepStatus = "pending"
) -> StepRecord:
    """A new step after the ticket's last one (indexes from 0)."""
    ticket_id = _uuid(ticket_id, "ticket")
    with db.write() as conn:
        return add_step_in(conn, ticket_id, title, status)


def update_step(
    db: Database,
    ticket_id: str,
    index: int,
    *,
    status: StepStatus | None = None,
    result: dict[str, Any] | None = None,
) -> StepRecord:
    """Change step `index`'s status and/or result (a JSON object); NotFoundError if none."""
    ticket_id = _uuid(ticket_id, "ticket")
    with db.write() as conn:
        return update_step_in(conn, ticket_id, index, status=status, result=result)


def update_step_in(
    conn: Connection,
    ticket_id: str,
    index: int,
    *,
    status: StepStatus | None = None,
    result: dict[str, Any] | None = None,
) -> StepRecord:
    """`update_step` in `conn`'s transaction."""
    repo.lock_ticket(conn, ticket_id)
    step = repo.update_step(
        conn, ticket_id, index, status=status, result=result, set_result=result is not None
    )
    repo.touch_ticket(conn, ticket_id)
    return step


# ------------------------------------------------------------------ a person's answer
def ticket_session(db: Database, session_id: str) -> TicketSessionRecord | None:
    """The session if it belongs to a ticket, else None."""
    with db.read() as conn:
        return repo.ticket_session(conn, _uuid(session_id, "session"))


def ticket_session_in(conn: Connection, session_id: str) -> TicketSessionRecord | None:
    """`ticket_session` in `conn`'s transaction."""
    return repo.ticket_session(conn, session_id)


def answer_ticket_session(
    db: Database,
    session_id: str,
    text: str,
    *,
    sender_id: str = "user",
    sender_name: str | None = None,
) -> Any:
    """A person's message to a ticket's session, stored as a `user` message with its
    UserEvent in the session's trace and a line in the agent's memory; a `suspended`
    session resumes (ticket `running`, the same session `active`) in the same transaction.

    An `active` session takes the message into the history of its next turn; a
    `completed` or `failed` one refuses it (ValidationError: reset the ticket to run
    again). Returns the stored message (core.steps.SessionMessage).
    """
    session_id = _uuid(session_id, "session")
    text = check_message(text)
    with db.write() as conn:
        found = repo.ticket_session(conn, session_id)
        if found is None:
            raise NotFoundError(f"no ticket session {session_id}")
        ticket = repo.lock_ticket(conn, found.ticket_id)
        session = repo.ticket_session(conn, session_id)  # again, now that the ticket is locked
        assert session is not None  # deleting it needs the ticket's lock
        if session.status in ("completed", "failed"):
            raise ValidationError(
                f"session {session_id} is {session.status}; "
                f"reset ticket {ticket.id} to run it again"
            )
        stored = _record_answer(conn, db, session, text, sender_id, sender_name)
        if session.status == "suspended":
            move_in(conn, ticket.id, "resume")
        else:
            repo.touch_ticket(conn, ticket.id)
    return stored


def say_in(
    conn: Connection,
    db: Database,
    session_id: str,
    agent_id: str,
    text: str,
    *,
    notice: bool = False,
) -> None:
    """Store what the ticket's agent says to a person in its session, in `conn`'s
    transaction: a message event in the session's trace and its `assistant` message (what
    the board shows as the question of a suspended ticket). A `notice` is OpenCrab's own
    (a limit reached, a call left in flight): the event is marked `ticket_notice`, so the
    model's history leaves it out."""
    events = EventLog(db)
    event = MessageEvent(
        id=uuid4(),
        trace_id=UUID(session_id),
        parent_id=events.last_id(session_id, conn=conn),
        timestamp=utcnow(),
        content=MessagePayload(text=text),
        metadata={"kind": "ticket_notice"} if notice else None,
    )
    events.append_many([event], conn=conn)
    said = Said("assistant", text, str(event.id), agent_id, None)
    insert_messages(conn, session_id, [said])


def _record_answer(
    conn: Connection,
    db: Database,
    session: TicketSessionRecord,
    text: str,
    sender_id: str,
    sender_name: str | None,
) -> SessionMessage:
    events = EventLog(db)
    event = UserEvent(
        id=uuid4(),
        trace_id=UUID(session.id),
        parent_id=events.last_id(session.id, conn=conn),
        timestamp=utcnow(),
        content=UserPayload(text=text),
        metadata={"source": "rest", "sender": sender_id},
    )
    events.append_many([event], conn=conn)
    said = Said("user", text, str(event.id), sender_id, sender_name)
    [(message_id, at)] = insert_messages(conn, session.id, [said])
    line = SessionLog(
        session_id=session.id,
        log_type="speech",
        content=text,
        speaker_id=sender_id,
        event_id=str(event.id),
    )
    MemoryManager(db, session.agent_id).append_session_logs([line], conn=conn)
    return SessionMessage(
        message_id, "user", text, at, str(event.id), sender_id, sender_name, interrupted=False
    )
