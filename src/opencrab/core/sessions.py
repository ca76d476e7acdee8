"""Chat sessions (the `sessions` table, kind "chat"): one conversation with one agent."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID, uuid4

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.errors import NotFoundError, SessionBusy, ValidationError
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import turn_key
from opencrab.store.tables import agent_sessions, messages, sessions


class Said(NamedTuple):
    """One message of a session as it is stored: who said what, with which event."""

    role: str  # user, assistant, system, tool
    content: str
    event_id: str | None
    speaker_id: str | None
    speaker_name: str | None
    interrupted: bool = False


_MESSAGE_COLUMNS = (
    "session_id",
    "role",
    "content",
    "timestamp",
    "event_id",
    "speaker_id",
    "speaker_name",
    "interrupted",
)


def insert_messages(
    conn: Connection, session_id: str, said: list[Said]
) -> list[tuple[int, datetime]]:
    """Write messages of a session inside the caller's transaction (the only writer);
    returns each one's id and timestamp, in order (a turn's step names what it wrote)."""
    now = datetime.now(UTC)
    insert = messages.insert().returning(messages.c.id)
    ids = []
    for m in said:  # a step writes one message: its id comes back with it
        row = dict(zip(_MESSAGE_COLUMNS, _message_row(session_id, m, now), strict=True))
        ids.append((int(conn.execute(insert, row).scalar_one()), now))
    return ids


def _message_row(session_id: str, m: Said, now: datetime) -> tuple[Any, ...]:
    return (
        session_id,
        m.role,
        m.content,
        now,
        m.event_id,
        m.speaker_id,
        m.speaker_name,
        m.interrupted,
    )


def ensure_chat_session(db: Database, agent_id: str, session_id: str | None = None) -> str:
    """The id of a chat session with the agent: `session_id` if given (created when new)."""
    if session_id is not None:
        try:
            session_id = str(UUID(session_id))
        except ValueError:
            raise ValidationError(f"session id {session_id!r} is not a UUID") from None
    new_id = session_id or str(uuid4())
    now = datetime.now(UTC)
    with db.write() as conn:
        row = conn.execute(
            sa.select(sessions.c.kind, sessions.c.agent_id, sessions.c.status).where(
                sessions.c.id == new_id
            )
        ).first()
        if row is None:
            conn.execute(
                sessions.insert().values(
                    id=new_id,
                    kind="chat",
                    status="active",
                    agent_id=agent_id,
                    created_at=now,
                    updated_at=now,
                )
            )
            return new_id
    if row.kind == "chat" and str(row.agent_id) != agent_id:
        raise ValidationError(f"session {new_id} belongs to another agent")
    if row.status not in ("active",):
        raise ValidationError(f"session {new_id} is {row.status}; start a new one")
    return new_id


def touch_session(db: Database, session_id: str) -> None:
    """Mark the session as updated now."""
    with db.write() as conn:
        done = conn.execute(
            sessions.update()
            .where(sessions.c.id == session_id)
            .values(updated_at=datetime.now(UTC))
        )
    if done.rowcount == 0:
        raise NotFoundError(f"no session {session_id}")


# ------------------------------------------------------------------ reading and ending
_SESSION_COLUMNS = (
    sessions.c.id,
    sessions.c.kind,
    sessions.c.status,
    sessions.c.agent_id,
    sessions.c.ticket_id,
    sessions.c.context,
    sessions.c.theme,
    sessions.c.created_at,
    sessions.c.updated_at,
)


TITLE_CHARS = 200
"""A session's title is cut to this many characters."""


def _title() -> sa.ColumnElement[Any]:
    """A discussion's theme, else the session's first user message (cut to TITLE_CHARS)."""
    first = (
        sa.select(sa.func.substr(messages.c.content, 1, TITLE_CHARS))
        .where(messages.c.session_id == sessions.c.id, messages.c.role == "user")
        .order_by(messages.c.id)
        .limit(1)
        .scalar_subquery()
    )
    return sa.func.coalesce(sessions.c.theme, first)


def _counted() -> sa.Select[Any]:
    count = (
        sa.select(sa.func.count(messages.c.id))
        .where(messages.c.session_id == sessions.c.id)
        .scalar_subquery()
    )
    return sa.select(
        *_SESSION_COLUMNS,
        sessions.c.participant_ids_json,
        sessions.c.facilitator_id,
        count.label("message_count"),
        _title().label("title"),
    )


def list_sessions(
    db: Database,
    *,
    agent_id: str | None = None,
    ticket_id: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    text: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[Any]:
    """Sessions, most recently updated first, with their message counts and titles.

    `agent_id`: the agent's own sessions and those it takes part in (discussions);
    `text`: found in the title (case-insensitive).
    """
    query = _counted()
    if agent_id is not None:
        member = sa.select(agent_sessions.c.session_id).where(agent_sessions.c.agent_id == agent_id)
        query = query.where(sa.or_(sessions.c.agent_id == agent_id, sessions.c.id.in_(member)))
    if ticket_id is not None:
        query = query.where(sessions.c.ticket_id == ticket_id)
    if status is not None:
        query = query.where(sessions.c.status == status)
    if kind is not None:
        query = query.where(sessions.c.kind == kind)
    if text:
        query = query.where(sa.func.lower(_title()).contains(text.lower(), autoescape=True))
    query = query.order_by(sessions.c.updated_at.desc(), sessions.c.id.desc())
    with db.read() as conn:
        return list(conn.execute(query.limit(limit).offset(offset)).all())


def get_session(db: Database, session_id: str) -> Any:
    """One session row with its message count; NotFoundError if there is none."""
    with db.read() as conn:
        row = conn.execute(_counted().where(sessions.c.id == str(session_id))).first()
    if row is None:
        raise NotFoundError(f"no session {session_id}")
    return row


_MESSAGE_FIELDS = (
    messages.c.id,
    messages.c.role,
    messages.c.content,
    messages.c.timestamp,
    messages.c.event_id,
    messages.c.speaker_id,
    messages.c.speaker_name,
    messages.c.interrupted,
)


def session_messages(
    db: Database, session_id: str, *, limit: int = 1000, after_id: int = 0
) -> list[Any]:
    """The session's messages in order (id, role, content, timestamp, event_id, speaker_id,
    speaker_name, interrupted)."""
    get_session(db, session_id)
    with db.read() as conn:
        return list(
            conn.execute(
                sa.select(*_MESSAGE_FIELDS)
                .where(messages.c.session_id == str(session_id), messages.c.id > after_id)
                .order_by(messages.c.id)
                .limit(limit)
            ).all()
        )


def end_session(db: Database, session_id: str) -> None:
    """Mark a session completed; its history stays readable."""
    with db.write() as conn:
        done = conn.execute(
            sessions.update()
            .where(sessions.c.id == str(session_id))
            .values(status="completed", updated_at=datetime.now(UTC))
        )
    if done.rowcount == 0:
        raise NotFoundError(f"no session {session_id}")


def open_chat_session(db: Database, session_id: str) -> Any:
    """The session, if a chat turn can run in it (an active chat session); else 400/404."""
    row = get_session(db, session_id)
    if row.kind != "chat" or row.agent_id is None:
        raise ValidationError(
            f"session {session_id} is a {row.kind} session; messages can be posted to chat sessions"
        )
    if row.status != "active":
        raise ValidationError(f"session {session_id} is {row.status}; start a new one")
    return row


_turn_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


def turn_lock(session_id: str) -> asyncio.Lock:
    """The lock a turn in `session_id` holds in this process, whichever gateway started it
    (one at a time); `hold_turn` takes it together with the session's lease.

    Kept while anyone holds or waits on it.
    """
    lock = _turn_locks.get(session_id)
    if lock is None:
        lock = _turn_locks[session_id] = asyncio.Lock()
    return lock


@asynccontextmanager
async def hold_turn(leases: LeaseKeeper, session_id: str) -> AsyncIterator[None]:
    """Hold `session_id` for one turn: this process's turn lock (waited for), then the
    session's lease (another process running a turn there raises SessionBusy, 409).

    The turn service (core/turns.py) holds it for every turn — chat (REST, WebSocket, /v1,
    CLI, Discord), heartbeat and discussion (with the discussion's bookkeeping).
    """
    async with (
        turn_lock(session_id),
        leases.holding(turn_key(session_id), busy=lambda: SessionBusy(session_id)),
    ):
        yield
