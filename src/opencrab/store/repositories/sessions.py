"""The sessions repository: sessions (chat, discussion, ticket), their messages, and each
participant's `agent_sessions` row.

The only code that writes `sessions` (a ticket's too: the tickets repository reads
them with their tickets), `messages` and `agent_sessions`; the functions return typed
rows (`SessionRow`, `MessageRow`, `DiscussionRow`). Functions taking a `Connection` run
inside the caller's transaction (a turn's recorder, an action, a ticket's move).

Example:
    created = claim_chat_session(db, session_id, agent_id)  # None: it was created now
    rows = list_sessions(db, agent_id=agent_id, kind="chat", limit=20)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import uuid4

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.errors import NotFoundError
from opencrab.store import Database, dialects
from opencrab.store.prepared import Prepared
from opencrab.store.tables import agent_sessions, agents, messages, sessions
from opencrab.store.types import utcnow


class Said(NamedTuple):
    """One message of a session as it is stored: who said what, with which event."""

    role: str  # user, assistant, system, tool
    content: str
    event_id: str | None
    speaker_id: str | None
    speaker_name: str | None
    interrupted: bool = False


@dataclass(frozen=True)
class SessionRow:
    """A session as lists show it: its columns, message count and title."""

    id: str
    kind: str
    status: str
    agent_id: str | None
    ticket_id: str | None
    context: dict[str, Any] | None
    theme: str | None
    created_at: datetime
    updated_at: datetime
    participant_ids_json: list[str]
    facilitator_id: str | None
    message_count: int
    title: str | None


@dataclass(frozen=True)
class MessageRow:
    """One stored message of a session."""

    id: int
    role: str
    content: str
    timestamp: datetime
    event_id: str | None
    speaker_id: str | None
    speaker_name: str | None
    interrupted: bool


@dataclass(frozen=True)
class DiscussionRow:
    """A discussion session's own columns (seed 001 discussion state)."""

    id: str
    status: str
    mode: str | None
    theme: str
    phase: str | None
    turn_number: int | None
    max_turns: int | None
    participant_ids_json: list[str] | None
    facilitator_id: str | None
    context: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Spoken:
    """A discussion's message as its speeches list it (agents' speeches, people's posts)."""

    id: int
    role: str
    content: str
    speaker_id: str | None
    speaker_name: str | None


# ------------------------------------------------------------------ messages
def insert_messages(
    conn: Connection, session_id: str, said: Sequence[Said]
) -> list[tuple[int, datetime]]:
    """Write messages of a session inside the caller's transaction (the only writer);
    returns each one's id and timestamp, in order (a turn's step names what it wrote)."""
    return queue_messages(conn, session_id, said)()


def queue_messages(
    conn: Connection, session_id: str, said: Sequence[Said]
) -> Callable[[], list[tuple[int, datetime]]]:
    """`insert_messages`, whose ids are read by calling the returned function: after
    the commit, so on PostgreSQL they come with it (Prepared.rows_later)."""
    now = datetime.now(UTC)
    later = [  # a step writes one message: its id comes back with it
        _INSERT_MESSAGE.rows_later(
            conn,
            session_id=session_id,
            role=m.role,
            content=m.content,
            timestamp=now,
            event_id=m.event_id,
            speaker_id=m.speaker_id,
            speaker_name=m.speaker_name,
            interrupted=m.interrupted,
        )
        for m in said
    ]
    return lambda: [(int(read()[0][0]), now) for read in later]


_INSERT_MESSAGE = Prepared(
    messages.insert()
    .values(
        {
            name: sa.bindparam(name)
            for name in (
                "session_id",
                "role",
                "content",
                "timestamp",
                "event_id",
                "speaker_id",
                "speaker_name",
                "interrupted",
            )
        }
    )
    .returning(messages.c.id)
)


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


def _message(row: Any) -> MessageRow:
    return MessageRow(
        id=row.id,
        role=row.role,
        content=row.content,
        timestamp=row.timestamp,
        event_id=row.event_id,
        speaker_id=row.speaker_id,
        speaker_name=row.speaker_name,
        interrupted=bool(row.interrupted),
    )


def session_messages(
    db: Database, session_id: str, *, limit: int = 1000, after_id: int = 0
) -> list[MessageRow]:
    """The session's messages with ids above `after_id`, in order (the first `limit`)."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(*_MESSAGE_FIELDS)
            .where(messages.c.session_id == session_id, messages.c.id > after_id)
            .order_by(messages.c.id)
            .limit(limit)
        ).all()
    return [_message(r) for r in rows]


# ------------------------------------------------------------------ sessions
@dataclass(frozen=True)
class SessionState:
    """Who a session belongs to and whether it is open."""

    kind: str
    agent_id: str | None
    status: str


def claim_chat_session(db: Database, session_id: str, agent_id: str) -> SessionState | None:
    """Create an active chat session `session_id` with the agent unless one exists:
    None when it was created now, else the existing session's state."""
    now = datetime.now(UTC)
    with db.write() as conn:
        row = conn.execute(
            sa.select(sessions.c.kind, sessions.c.agent_id, sessions.c.status).where(
                sessions.c.id == session_id
            )
        ).first()
        if row is None:
            conn.execute(
                sessions.insert().values(
                    id=session_id,
                    kind="chat",
                    status="active",
                    agent_id=agent_id,
                    created_at=now,
                    updated_at=now,
                )
            )
            return None
    return SessionState(
        row.kind, None if row.agent_id is None else str(row.agent_id), str(row.status)
    )


def session_state(db: Database, session_id: str) -> SessionState | None:
    """The session's kind, agent and status (None when there is none): one short read,
    without the message count and title `get_session` works out."""
    with db.read() as conn:
        row = _SESSION_STATE.first(conn, id=str(session_id))
    if row is None:
        return None
    return SessionState(
        row.kind, None if row.agent_id is None else str(row.agent_id), str(row.status)
    )


_SESSION_STATE = Prepared(
    sa.select(sessions.c.kind, sessions.c.agent_id, sessions.c.status).where(
        sessions.c.id == sa.bindparam("id")
    )
)


def touch_session(db: Database, session_id: str, *, status: str | None = None) -> bool:
    """Mark the session as updated now (and set its status when given); False if none."""
    values: dict[str, Any] = {"updated_at": datetime.now(UTC)}
    if status is not None:
        values["status"] = status
    with db.write() as conn:
        done = conn.execute(sessions.update().where(sessions.c.id == session_id).values(**values))
    return bool(done.rowcount)


def touch_in(conn: Connection, session_id: str) -> None:
    """Mark the session as updated now, in the caller's transaction."""
    conn.execute(
        sessions.update().where(sessions.c.id == session_id).values(updated_at=datetime.now(UTC))
    )


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


def _session(row: Any) -> SessionRow:
    return SessionRow(
        id=str(row.id),
        kind=row.kind,
        status=row.status,
        agent_id=row.agent_id,
        ticket_id=row.ticket_id,
        context=row.context,
        theme=row.theme,
        created_at=row.created_at,
        updated_at=row.updated_at,
        participant_ids_json=list(row.participant_ids_json or []),
        facilitator_id=row.facilitator_id,
        message_count=int(row.message_count or 0),
        title=row.title,
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
) -> list[SessionRow]:
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
        rows = conn.execute(query.limit(limit).offset(offset)).all()
    return [_session(r) for r in rows]


def get_session(db: Database, session_id: str) -> SessionRow | None:
    """One session with its message count and title, or None."""
    with db.read() as conn:
        row = conn.execute(_counted().where(sessions.c.id == session_id)).first()
    return None if row is None else _session(row)


def update_context(
    db: Database,
    session_id: str,
    change: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    status: str | None = None,
    next_turn: bool = False,
    touch: bool = False,
) -> bool:
    """Replace the session's context with `change(context)` in one write transaction (and
    set its status, advance its turn counter, mark it updated when asked); False if none."""
    with db.write() as conn:
        row = conn.execute(sa.select(sessions.c.context).where(sessions.c.id == session_id)).first()
        if row is None:
            return False
        values: dict[str, Any] = {"context": change(dict(row.context or {}))}
        if status is not None:
            values["status"] = status
        if next_turn:
            values["turn_number"] = sessions.c.turn_number + 1
        if touch or status is not None or next_turn:
            values["updated_at"] = datetime.now(UTC)
        conn.execute(sessions.update().where(sessions.c.id == session_id).values(**values))
    return True


# ------------------------------------------------------------------ ticket sessions
def insert_ticket_session(conn: Connection, ticket_id: str, agent_id: str) -> str:
    """A new `active` session for the ticket's run; returns its id."""
    session_id = str(uuid4())
    _NEW_TICKET_SESSION.run(
        conn, s_id=session_id, s_agent=agent_id, s_ticket=ticket_id, s_context={}, s_now=utcnow()
    )
    return session_id


def set_ticket_session_status(conn: Connection, session_id: str, status: str) -> None:
    """Store a ticket session's new status."""
    _TICKET_SESSION_STATUS.run(conn, s_id=session_id, s_status=status, s_now=utcnow())


_S_NOW = sa.bindparam("s_now", type_=sessions.c.updated_at.type)
_NEW_TICKET_SESSION = Prepared(
    sessions.insert().values(
        id=sa.bindparam("s_id"),
        kind="ticket",
        status="active",
        agent_id=sa.bindparam("s_agent"),
        ticket_id=sa.bindparam("s_ticket"),
        context=sa.bindparam("s_context", type_=sessions.c.context.type),
        created_at=_S_NOW,
        updated_at=_S_NOW,
    )
)
_TICKET_SESSION_STATUS = Prepared(
    sessions.update()
    .where(sessions.c.id == sa.bindparam("s_id"), sessions.c.kind == "ticket")
    .values(status=sa.bindparam("s_status"), updated_at=_S_NOW)
)


def continued_chat(db: Database, agent_id: str, path: tuple[str, str], value: str) -> str | None:
    """The agent's latest active chat session whose context holds `value` at `path`
    (two keys deep), if any."""
    marker = sessions.c.context[path[0]][path[1]].as_string()
    with db.read() as conn:
        found = conn.execute(
            sa.select(sessions.c.id)
            .where(
                sessions.c.agent_id == agent_id,
                sessions.c.kind == "chat",
                sessions.c.status == "active",
                marker == value,
            )
            .order_by(sessions.c.updated_at.desc())
            .limit(1)
        ).scalar()
    return None if found is None else str(found)


# ------------------------------------------------------------------ discussions
def create_discussion(
    db: Database,
    session_id: str,
    *,
    theme: str,
    mode: str,
    phase: str,
    participants: Sequence[str],
    facilitator_id: str | None,
    max_turns: int | None,
) -> None:
    """Store a new active discussion and everyone's `agent_sessions` row; NotFoundError
    naming the agents that do not exist (nothing is stored then)."""
    now = datetime.now(UTC)
    everyone = [*participants, *([facilitator_id] if facilitator_id else [])]
    with db.write() as conn:
        found = set(conn.execute(sa.select(agents.c.id).where(agents.c.id.in_(everyone))).scalars())
        missing = [p for p in everyone if p not in found]
        if missing:
            raise NotFoundError(f"no agents {missing}")
        conn.execute(
            sessions.insert().values(
                id=session_id,
                kind="discussion",
                status="active",
                mode=mode,
                theme=theme,
                phase=phase,
                turn_number=0,
                participant_ids_json=list(participants),
                facilitator_id=facilitator_id,
                done_count=0,
                max_turns=max_turns,
                context={},
                created_at=now,
                updated_at=now,
            )
        )
        conn.execute(
            agent_sessions.insert(),
            [{"agent_id": p, "session_id": session_id} for p in everyone],
        )


def get_discussion(db: Database, session_id: str) -> DiscussionRow | None:
    """A discussion's own columns, or None when there is no such discussion."""
    with db.read() as conn:
        row = conn.execute(
            sa.select(sessions).where(sessions.c.id == session_id, sessions.c.kind == "discussion")
        ).first()
    if row is None:
        return None
    return DiscussionRow(
        id=str(row.id),
        status=row.status,
        mode=row.mode,
        theme=row.theme,
        phase=row.phase,
        turn_number=row.turn_number,
        max_turns=row.max_turns,
        participant_ids_json=row.participant_ids_json,
        facilitator_id=row.facilitator_id,
        context=row.context,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def add_participant(db: Database, session_id: str, agent_id: str) -> None:
    """Add an agent to a discussion's participants (NotFoundError if there is no agent)."""
    with db.write() as conn:
        if conn.execute(sa.select(agents.c.id).where(agents.c.id == agent_id)).first() is None:
            raise NotFoundError(f"no agent {agent_id}")
        row = conn.execute(
            sa.select(sessions.c.participant_ids_json).where(sessions.c.id == session_id)
        ).one()
        conn.execute(
            sessions.update()
            .where(sessions.c.id == session_id)
            .values(
                participant_ids_json=[*(row.participant_ids_json or []), agent_id],
                updated_at=datetime.now(UTC),
            )
        )
        conn.execute(agent_sessions.insert().values(agent_id=agent_id, session_id=session_id))


def done_declared(db: Database, session_id: str) -> dict[str, bool]:
    """Whether each participant of the session declared itself done, by agent id."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(agent_sessions.c.agent_id, agent_sessions.c.done_declared).where(
                agent_sessions.c.session_id == session_id
            )
        ).all()
    return {str(r.agent_id): bool(r.done_declared) for r in rows}


def latest_spoken(db: Database, session_id: str, *, after: int, limit: int) -> list[Spoken]:
    """The session's latest `limit` user and assistant messages after id `after`, newest
    first."""
    m = messages.c
    query = (
        sa.select(m.id, m.role, m.content, m.speaker_id, m.speaker_name)
        .where(m.session_id == session_id, m.role.in_(("user", "assistant")), m.id > after)
        .order_by(m.id.desc())
        .limit(limit)
    )
    with db.read() as conn:
        rows = conn.execute(query).all()
    return [Spoken(r.id, r.role, r.content, r.speaker_id, r.speaker_name) for r in rows]


def active_discussions(db: Database) -> list[tuple[str, dict[str, Any]]]:
    """The active discussions: (id, context) of each."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(sessions.c.id, sessions.c.context).where(
                sessions.c.kind == "discussion", sessions.c.status == "active"
            )
        ).all()
    return [(str(r.id), dict(r.context or {})) for r in rows]


def autonomous_discussions(conn: Connection) -> list[dict[str, Any]]:
    """Every participant of every active autonomous discussion: agent_id, id (the
    session's), done_count, last_speech_at, done_declared and the session's context."""
    s, a = sessions.c, agent_sessions.c
    rows = conn.execute(
        sa.select(a.agent_id, s.id, s.done_count, a.last_speech_at, a.done_declared, s.context)
        .join(sessions, s.id == a.session_id)
        .where(s.kind == "discussion", s.status == "active", s.mode == "autonomous")
    ).all()
    return [r._asdict() for r in rows]


# ------------------------------------------------------------------ a participant's acts
def set_phase(conn: Connection, session_id: str, phase: str) -> None:
    """Open a discussion's next phase, in the caller's transaction."""
    conn.execute(
        sessions.update()
        .where(sessions.c.id == session_id)
        .values(phase=phase, updated_at=datetime.now(UTC))
    )


def mark_speech(conn: Connection, agent_id: str, session_id: str, now: datetime) -> None:
    """Remember when the agent last spoke in the session (its row is made when missing)."""
    _SPOKE.run(conn, agent_id=agent_id, session_id=session_id, now=now)


_SPOKE = Prepared(
    lambda dialect: dialects.upsert(
        dialect,
        agent_sessions,
        ("agent_id", "session_id"),
        agent_id=sa.bindparam("agent_id"),
        session_id=sa.bindparam("session_id"),
        last_speech_at=sa.bindparam("now"),
    )
)


def declare_done(db: Database, agent_id: str, session_id: str) -> int:
    """The agent declares itself done in the session (once); returns the session's count
    of participants done."""
    mine = (agent_sessions.c.agent_id == agent_id, agent_sessions.c.session_id == session_id)
    with db.write() as conn:
        exists = conn.execute(sa.select(sa.literal(1)).where(*mine)).first()
        if exists is None:
            conn.execute(agent_sessions.insert().values(agent_id=agent_id, session_id=session_id))
        already = conn.execute(sa.select(agent_sessions.c.done_declared).where(*mine)).scalar()
        if not already:
            conn.execute(agent_sessions.update().where(*mine).values(done_declared=True))
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(done_count=sessions.c.done_count + 1, updated_at=datetime.now(UTC))
            )
        count = conn.execute(
            sa.select(sessions.c.done_count).where(sessions.c.id == session_id)
        ).scalar()
    return int(count or 0)


# ------------------------------------------------------------------ a session's context
@dataclass(frozen=True)
class SessionContext:
    """A session's stored context (`{}` when it has none)."""

    context: dict[str, Any]


def session_context(conn: Connection, session_id: str) -> Any:
    """The session's context as stored (None when it has none or there is no such session)."""
    return _SESSION_CONTEXT.scalar(conn, id=str(session_id))


def queue_session_context(conn: Connection, session_id: str) -> None:
    """Send `session_context`'s read ahead (Prepared.queue: one round trip with others)."""
    _SESSION_CONTEXT.queue(conn, id=str(session_id))


def find_session_context(conn: Connection, session_id: str) -> SessionContext | None:
    """The session's context inside the caller's transaction, None when there is no such
    session (a session's per-agent model choices, core/llm_config.py, live in it)."""
    row = conn.execute(
        sa.select(sessions.c.context).where(sessions.c.id == str(session_id))
    ).first()
    return None if row is None else SessionContext(dict(row.context or {}))


def set_session_context(conn: Connection, session_id: str, context: dict[str, Any]) -> None:
    """Replace the session's context inside the caller's transaction."""
    conn.execute(sessions.update().where(sessions.c.id == str(session_id)).values(context=context))


_SESSION_CONTEXT = Prepared(
    sa.select(sessions.c.context).where(sessions.c.id == sa.bindparam("id"))
)
