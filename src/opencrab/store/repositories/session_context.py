"""A session's `context` JSON: what is kept per session beside its messages.

Read and written inside the caller's transaction (a session's per-agent model choices,
`core/llm_config.py`, live here under `llm_overrides`). Sessions' other columns belong
to the sessions repository.

Example:
    with db.write() as conn:
        found = find_session_context(conn, session_id)  # None: no such session
        if found is not None:
            set_session_context(conn, session_id, {**found.context, "k": "v"})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.prepared import Prepared
from opencrab.store.tables import sessions


@dataclass(frozen=True)
class SessionContext:
    """A session's stored context (`{}` when it has none)."""

    context: dict[str, Any]


def session_context(conn: Connection, session_id: str) -> Any:
    """The session's context as stored (None when it has none or there is no such session)."""
    return _SESSION_CONTEXT.scalar(conn, id=str(session_id))


def find_session_context(conn: Connection, session_id: str) -> SessionContext | None:
    """The session's context, None when there is no such session."""
    row = conn.execute(
        sa.select(sessions.c.context).where(sessions.c.id == str(session_id))
    ).first()
    return None if row is None else SessionContext(dict(row.context or {}))


def set_session_context(conn: Connection, session_id: str, context: dict[str, Any]) -> None:
    """Replace the session's context."""
    conn.execute(sessions.update().where(sessions.c.id == str(session_id)).values(context=context))


_SESSION_CONTEXT = Prepared(
    sa.select(sessions.c.context).where(sessions.c.id == sa.bindparam("id"))
)
