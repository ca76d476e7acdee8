"""Which traces make up a session, and reading its events with their place in the log.

A chat (or ticket) session is one trace, the session's id. A discussion has that trace
too (people's posts go there) and one trace per participant (core.discussion
`trace_for`). The WebSocket's `subscribe`, `GET /api/sessions/{id}/events` and the
dashboard's live view all read a session through `session_feed` and `read_events`, so
they agree on what belongs to it and on each event's `seq` (the resume cursor).

Example:
    feed = session_feed(runtime, session_id)
    for seq, trace, body in read_events(runtime.db, feed.traces, after_seq=0, limit=100):
        print(seq, feed.speakers.get(trace), body)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opencrab.core.discussion import Discussion
from opencrab.core.sessions import get_session
from opencrab.server.live import read_events

if TYPE_CHECKING:
    from opencrab.core.runtime import Runtime

__all__ = ["Participant", "SessionFeed", "read_events", "session_feed"]


@dataclass(frozen=True)
class Participant:
    """An agent of a discussion and its own trace there."""

    agent_id: str
    name: str
    trace_id: str
    facilitator: bool = False


@dataclass(frozen=True)
class SessionFeed:
    """A session's row and its traces: `speakers` maps a participant's trace to its agent."""

    session: Any  # core.sessions.get_session's row
    speakers: dict[str, str] = field(default_factory=dict)
    participants: list[Participant] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.session.id)

    @property
    def traces(self) -> list[str]:
        """The session's own trace first, then the participants' traces."""
        return [self.id, *self.speakers]

    def agent_of(self, trace: str) -> str | None:
        """Whose trace it is: a participant, a chat's agent, or None (people's posts)."""
        if trace in self.speakers:
            return self.speakers[trace]
        if self.session.kind != "discussion" and self.session.agent_id is not None:
            return str(self.session.agent_id)
        return None


def session_feed(runtime: Runtime, session_id: str) -> SessionFeed:
    """The session (NotFoundError when there is none) with its traces and participants."""
    row = get_session(runtime.db, session_id)
    if row.kind != "discussion":
        return SessionFeed(row)
    discussion = Discussion.load(runtime.db, str(row.id))
    names = {agent_id: name for agent_id, (name, _) in runtime.agents.names().items()}
    participants = [
        Participant(
            agent_id,
            names.get(agent_id, agent_id),
            discussion.trace_for(agent_id),
            facilitator=agent_id == discussion.facilitator_id,
        )
        for agent_id in discussion.everyone
    ]
    speakers = {p.trace_id: p.agent_id for p in participants}
    return SessionFeed(row, speakers, participants)
