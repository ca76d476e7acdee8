"""One session, live: its events rendered on the server, then followed over `/api/ws`.

The page shows the newest `WINDOW` events of the session (read as
`GET /api/sessions/{id}/events?newest=true` reads them) with a link to earlier ones
(`?before=SEQ`, a page of history that does not follow along). `static/js/live.js`
subscribes after the last event shown and appends what comes; the operator's message
goes through the public API: `POST /api/sessions/{id}/messages` for a chat,
`POST /api/discussions/{id}/messages` (a mentor instruction) for a discussion. Tool
calls of the session waiting for a person's approval are listed above the feed with
Approve / Deny (`_session_approvals.html`, polled at `/sessions/{id}/approvals`); their
rows say "waiting" instead of "running".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

import orjson
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from opencrab.core.discussion import Discussion
from opencrab.core.runtime import Runtime
from opencrab.dashboard.event_rows import build_rows, pretty
from opencrab.dashboard.render import fragment, render
from opencrab.offload import run_blocking
from opencrab.reports.sessions import SessionSummary, summary_of
from opencrab.server.schemas import MAX_SQL_INTEGER
from opencrab.server.session_feed import read_events, session_feed
from opencrab.store.repositories.approvals import ApprovalRecord

router = APIRouter()

WINDOW = 300
"""Events a page shows at most; earlier ones are a link away."""

SessionId = Annotated[UUID, Path(alias="id", description="The session's id.")]


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    language: str
    facilitator: bool = False


@router.get("/sessions/{id}", response_class=HTMLResponse)
async def session_page(
    session_id: SessionId,
    request: Request,
    before: Annotated[int | None, Query(ge=1, le=MAX_SQL_INTEGER)] = None,
) -> HTMLResponse:
    """A session's events as they happen (or, with `before`, a page of earlier ones)."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(live_view, runtime, str(session_id), before)
    return render(request, "session.html", title=view["heading"], feed=view, **view)


@router.get("/sessions/{id}/approvals", response_class=HTMLResponse)
async def session_approvals(session_id: SessionId, request: Request) -> HTMLResponse:
    """The session's calls waiting for a person, with Approve / Deny (an HTMX part)."""
    runtime: Runtime = request.app.state.runtime
    held = await run_blocking(pending_approvals, runtime, str(session_id))
    return fragment(request, "_session_approvals.html", session_id=str(session_id), approvals=held)


def pending_approvals(runtime: Runtime, session_id: str) -> list[tuple[ApprovalRecord, str]]:
    """The session's calls waiting for a person, oldest first, with their arguments shown."""
    held = runtime.approvals.list_approvals(session_id=session_id, status="pending")
    return [(a, pretty(a.arguments)) for a in held]


@router.get("/discussions/{id}")
async def discussion_page(session_id: SessionId) -> RedirectResponse:
    """A discussion is watched where every session is."""
    return RedirectResponse(f"/sessions/{session_id}", status_code=307)


def live_view(runtime: Runtime, session_id: str, before: int | None) -> dict[str, Any]:
    """What `templates/_live_feed.html` shows of a session (the newest events, or a page
    before `before`), with its people and totals; a ticket's page embeds it too."""
    feed = session_feed(runtime, session_id)
    session: SessionSummary = summary_of(feed.session)
    names = runtime.agents.names()
    default = runtime.settings.agent.language
    discussion = None
    if session.kind == "discussion":
        discussion = Discussion.load(runtime.db, feed.id)
        people = [
            Person(p.agent_id, p.name, names.get(p.agent_id, (p.name, default))[1], p.facilitator)
            for p in feed.participants
        ]
    elif session.agent_id is not None and str(session.agent_id) in names:
        name, language = names[str(session.agent_id)]
        people = [Person(str(session.agent_id), name, language)]
    else:
        people = []
    language = people[0].language if people else default
    stored = read_events(runtime.db, feed.traces, before_seq=before, newest=True, limit=WINDOW + 1)
    earlier = len(stored) > WINDOW
    stored = stored[-WINDOW:]
    events = [(seq, feed.agent_of(trace), orjson.loads(body)) for seq, trace, body in stored]
    rows = build_rows(events, names, language)
    approvals = pending_approvals(runtime, feed.id) if before is None else []
    for approval, _ in approvals:
        held = rows.by_id.get(approval.call_event_id)
        if held is not None:
            held.waiting = True
    if discussion is not None:
        heading = discussion.theme
        post_url: str | None = f"/api/discussions/{feed.id}/messages"
    else:
        heading = f"Chat with {people[0].name}" if people else f"Session {feed.id}"
        post_url = f"/api/sessions/{feed.id}/messages" if session.kind == "chat" else None
    return {
        "session": session,
        "discussion": discussion,
        "heading": heading,
        "people": people,
        "language": language,
        "rows": rows,
        "approvals": approvals,
        "session_id": feed.id,
        "earlier": stored[0][0] if earlier and stored else None,
        "live": before is None,
        "last_seq": stored[-1][0] if stored else 0,
        "last_event_id": events[-1][2]["id"] if events else "",
        "event_count": len(events),
        "post_url": post_url,
        "speakers_json": json.dumps(
            {p.id: {"name": p.name, "lang": p.language} for p in people}, ensure_ascii=False
        ),
    }
