"""Chat sessions (the `sessions` table, kind "chat"): one conversation with one agent."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import UUID, uuid4

from opencrab.errors import NotFoundError, SessionBusy, ValidationError
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import turn_key
from opencrab.store.repositories import sessions as repo
from opencrab.store.repositories.sessions import (
    TITLE_CHARS,
    MessageRow,
    Said,
    SessionRow,
    SessionState,
    insert_messages,
    list_sessions,
    queue_messages,
)

__all__ = [
    "TITLE_CHARS",
    "MessageRow",
    "Said",
    "SessionRow",
    "SessionState",
    "check_chat_open",
    "end_session",
    "ensure_chat_session",
    "get_session",
    "hold_turn",
    "insert_messages",
    "list_sessions",
    "open_chat_session",
    "queue_messages",
    "session_messages",
    "session_state",
    "touch_session",
    "turn_lock",
]


def ensure_chat_session(db: Database, agent_id: str, session_id: str | None = None) -> str:
    """The id of a chat session with the agent: `session_id` if given (created when new)."""
    if session_id is not None:
        try:
            session_id = str(UUID(session_id))
        except ValueError:
            raise ValidationError(f"session id {session_id!r} is not a UUID") from None
    new_id = session_id or str(uuid4())
    row = repo.claim_chat_session(db, new_id, agent_id)
    if row is None:
        return new_id
    if row.kind == "chat" and str(row.agent_id) != agent_id:
        raise ValidationError(f"session {new_id} belongs to another agent")
    if row.status not in ("active",):
        raise ValidationError(f"session {new_id} is {row.status}; start a new one")
    return new_id


def touch_session(db: Database, session_id: str) -> None:
    """Mark the session as updated now."""
    if not repo.touch_session(db, session_id):
        raise NotFoundError(f"no session {session_id}")


def mark_session(db: Database, session_id: str, path: tuple[str, str], value: str) -> None:
    """Keep `value` at `path` (two keys deep) in the session's context, the rest of it as
    it was: how a gateway finds the session a conversation continues in
    (`marked_chat_session`)."""
    repo.update_context(db, session_id, lambda context: {**context, path[0]: {path[1]: value}})


def marked_chat_session(
    db: Database, agent_id: str, path: tuple[str, str], value: str
) -> str | None:
    """The agent's latest active chat session marked with `value` at `path`, if any."""
    return repo.continued_chat(db, agent_id, path, value)


# ------------------------------------------------------------------ reading and ending
def get_session(db: Database, session_id: str) -> SessionRow:
    """One session with its message count and title; NotFoundError if there is none."""
    row = repo.get_session(db, str(session_id))
    if row is None:
        raise NotFoundError(f"no session {session_id}")
    return row


def session_messages(
    db: Database, session_id: str, *, limit: int = 1000, after_id: int = 0
) -> list[MessageRow]:
    """The session's messages in order (NotFoundError if there is no session)."""
    get_session(db, session_id)
    return repo.session_messages(db, str(session_id), limit=limit, after_id=after_id)


def end_session(db: Database, session_id: str) -> None:
    """Mark a session completed; its history stays readable."""
    if not repo.touch_session(db, str(session_id), status="completed"):
        raise NotFoundError(f"no session {session_id}")


def session_state(db: Database, session_id: str) -> SessionState:
    """The session's kind, agent and status (one short read); NotFoundError if there is
    no such session."""
    state = repo.session_state(db, str(session_id))
    if state is None:
        raise NotFoundError(f"no session {session_id}")
    return state


def open_chat_session(db: Database, session_id: str) -> SessionState:
    """The session's state, if a chat turn can run in it (an active chat session); else
    400/404."""
    return check_chat_open(session_id, session_state(db, session_id))


def check_chat_open(session_id: str, row: SessionState) -> SessionState:
    """`row` (the state of `session_id`) if a chat turn can run in it; else 400."""
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


BUSY_POLL_SECS = 0.25
"""How often a turn that waits (`hold_turn(wait=True)`) tries the session's lease again."""


@asynccontextmanager
async def hold_turn(
    leases: LeaseKeeper, session_id: str, *, wait: bool = False
) -> AsyncIterator[None]:
    """Hold `session_id` for one turn: this process's turn lock (waited for), then the
    session's lease (another process running a turn there raises SessionBusy, 409; with
    `wait`, it is tried again every BUSY_POLL_SECS until that turn has ended or its
    process is gone, as long as the caller waits).

    The turn service (core/turns.py) holds it for every turn — chat (REST, WebSocket, /v1,
    CLI, chat gateways), heartbeat and discussion (with the discussion's bookkeeping).
    """
    key = turn_key(session_id)
    async with turn_lock(session_id):
        while wait and not await leases.acquire(key):
            await asyncio.sleep(BUSY_POLL_SECS)
        if wait:  # taken above: held until the block ends
            try:
                yield
            finally:
                await leases.release(key)
            return
        async with leases.holding(key, busy=lambda: SessionBusy(session_id)):
            yield
