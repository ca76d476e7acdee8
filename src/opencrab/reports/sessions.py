"""Sessions as the API and the pages list and show them: one page of a kind's sessions
(chats, discussions, tickets' sessions), one session with its messages, a message."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from opencrab.core.runtime import Runtime
from opencrab.core.sessions import get_session, list_sessions, session_messages
from opencrab.reports.model import ApiModel

SessionStatus = Literal["active", "suspended", "completed", "failed"]


class MessageResponse(ApiModel):
    id: int
    role: Literal["user", "assistant", "system", "tool"]
    content: str
    timestamp: datetime
    event_id: UUID | None = None
    speaker_id: str | None = Field(
        default=None, description="Who said it: the agent's id, or the person's sender id."
    )
    speaker_name: str | None = Field(default=None, description="The speaker's name.")
    interrupted: bool = Field(
        default=False, description="The turn was stopped while this was said: it is partial."
    )


SessionKind = Literal["chat", "discussion", "ticket"]


class SessionSummary(ApiModel):
    id: UUID
    kind: SessionKind
    agent_id: UUID | None = None
    ticket_id: UUID | None = None
    status: SessionStatus
    theme: str | None = None
    title: str | None = Field(
        default=None,
        description="A discussion's theme, else the first user message (its first 200 characters).",
    )
    participant_ids: list[UUID] = Field(
        default_factory=list,
        description="A discussion's agents (participants, then the facilitator).",
    )
    message_count: int
    created_at: datetime
    updated_at: datetime


class SessionResponse(SessionSummary):
    context: dict[str, Any] | None = None
    messages: list[MessageResponse]


def _summary(row: Any) -> dict[str, Any]:
    participants = [str(p) for p in row.participant_ids_json or []]
    if row.facilitator_id is not None:
        participants.append(str(row.facilitator_id))
    return {
        "id": row.id,
        "kind": row.kind,
        "agent_id": row.agent_id,
        "ticket_id": row.ticket_id,
        "status": row.status,
        "theme": row.theme,
        "title": row.title,
        "participant_ids": participants,
        "message_count": row.message_count,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def summary_of(row: Any) -> SessionSummary:
    """A session row (core.sessions.list_sessions / get_session) as the API lists it."""
    return SessionSummary.model_validate(_summary(row))


def find_sessions(
    runtime: Runtime,
    *,
    kind: SessionKind | Literal["all"],
    agent: str | None = None,
    ticket_id: UUID | None = None,
    status: str | None = None,
    text: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[SessionSummary]:
    """One page of sessions of one `kind` (or all) as `GET /api/sessions` lists them (the
    dashboard's lists too)."""
    rows = list_sessions(
        runtime.db,
        agent_id=None if agent is None else runtime.agents.get(agent).id,
        ticket_id=None if ticket_id is None else str(ticket_id),
        kind=None if kind == "all" else kind,
        status=status,
        text=text,
        limit=limit,
        offset=offset,
    )
    return [summary_of(r) for r in rows]


def message_response(row: Any) -> MessageResponse:
    """A stored message (core.sessions.session_messages, or the SessionMessage a turn's
    step wrote) as the API shows it."""
    return MessageResponse(
        id=row.id,
        role=row.role,
        content=row.content,
        timestamp=row.timestamp,
        event_id=row.event_id,
        speaker_id=row.speaker_id,
        speaker_name=row.speaker_name,
        interrupted=bool(row.interrupted),
    )


def session_view(runtime: Runtime, session_id: str) -> SessionResponse:
    """One session and its messages (at most 10,000), as `GET /api/sessions/{id}` shows it."""
    row = get_session(runtime.db, session_id)
    messages = [message_response(r) for r in session_messages(runtime.db, session_id, limit=10_000)]
    return SessionResponse.model_validate(
        {**_summary(row), "context": row.context, "messages": messages}
    )


def messages(
    runtime: Runtime, session_id: str, *, after_id: int = 0, limit: int = 1000
) -> list[MessageResponse]:
    """A session's messages in order, only those after `after_id`, at most `limit`."""
    rows = session_messages(runtime.db, session_id, limit=limit, after_id=after_id)
    return [message_response(r) for r in rows]
