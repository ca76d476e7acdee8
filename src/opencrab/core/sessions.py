"""Chat sessions (the `sessions` table, kind "chat"): one conversation with one agent."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

import sqlalchemy as sa

from opencrab.errors import NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.tables import sessions


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
