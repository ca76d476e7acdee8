"""Chat: talk to an agent, its reply streamed as the model writes it.

The page renders the conversation so far on the server (`?session=ID`: a chat session of
this agent) with the agent's recent chats beside it; `static/js/chat.js` sends each
message over the public WebSocket `/api/ws` (`{"type": "chat"}`) and shows what comes
back as it comes: the reply's tokens, the agent's inner voice and its actions.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import get_session, list_sessions, session_messages
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.errors import NotFoundError
from opencrab.messages import MAX_MESSAGE_CHARS
from opencrab.offload import run_blocking

router = APIRouter()

SHOWN_MESSAGES = 500
"""The latest messages a page shows of a long session (the Sessions page has them all)."""
RECENT_CHATS = 12

SessionParam = Annotated[
    UUID | None, Query(alias="session", description="A chat session of this agent to go on with.")
]


@router.get("/agents/{name}/chat", response_class=HTMLResponse)
async def chat(agent: PageAgent, request: Request, session: SessionParam = None) -> HTMLResponse:
    """The conversation (a new one, or `?session=`) and the agent's recent chats."""
    runtime: Runtime = request.app.state.runtime
    current = None if session is None else str(session)
    found = await run_blocking(_read, runtime, agent, current)
    return render(
        request,
        "chat.html",
        title=f"Chat · {agent.name}",
        agent=agent,
        tab="chat",
        max_chars=MAX_MESSAGE_CHARS,
        **found,
    )


def _read(runtime: Runtime, agent: Agent, session_id: str | None) -> dict[str, Any]:
    """The session's stored messages (when one is asked for) and the agent's recent chats."""
    db = runtime.db
    recent = list_sessions(db, agent_id=agent.id, kind="chat", limit=RECENT_CHATS)
    if session_id is None:
        return {"session": None, "messages": [], "earlier": 0, "recent": recent}
    row = get_session(db, session_id)  # a missing one: the 404 page
    if row.kind != "chat" or str(row.agent_id) != agent.id:
        raise NotFoundError(f"{agent.name} has no chat session {session_id}")
    said = session_messages(db, session_id, limit=10_000)
    return {
        "session": row,
        "messages": said[-SHOWN_MESSAGES:],
        "earlier": max(0, len(said) - SHOWN_MESSAGES),
        "recent": recent,
    }
