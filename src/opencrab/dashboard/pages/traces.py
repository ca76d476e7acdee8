"""Trace views: the timeline of a trace's AgentEvents (`/traces/{trace_id}`, as
`GET /api/traces/{trace_id}/events` reads them; an imported session's id is its trace
id) and of every trace of a live session (`/sessions/{id}/trace`, as
`GET /api/sessions/{id}/events` reads them). `trace_steps` builds the steps.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import orjson
from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.dashboard.trace_steps import build_trace
from opencrab.errors import NotFoundError
from opencrab.event_log import EventLog
from opencrab.events import EVENTS_ADAPTER
from opencrab.offload import run_blocking
from opencrab.server.session_feed import read_events, session_feed
from opencrab.store.repositories import imports as imports_repo

router = APIRouter()

MAX_EVENTS = 5000
"""Events a trace page shows at most (the first ones)."""


@router.get("/traces/{trace_id}", response_class=HTMLResponse)
async def trace_page(
    trace_id: Annotated[UUID, Path(description="The trace's id.")], request: Request
) -> HTMLResponse:
    """One trace's events as a timeline."""
    runtime: Runtime = request.app.state.runtime
    log: EventLog = request.app.state.event_log
    view = await run_blocking(_trace_view, runtime, log, str(trace_id))
    return render(request, "trace.html", title=f"Trace {str(trace_id)[:8]}", **view)


def _trace_view(runtime: Runtime, log: EventLog, trace_id: str) -> dict[str, Any]:
    events = log.trace(trace_id)
    if not events:
        raise NotFoundError(f"trace {trace_id} has no events")
    dumped = EVENTS_ADAPTER.dump_python(events[:MAX_EVENTS], mode="json")
    with runtime.db.read() as conn:
        imported = imports_repo.get(conn, trace_id)
    language = runtime.settings.agent.language
    trace = build_trace([(i, None, e) for i, e in enumerate(dumped)], {}, language)
    back = None
    if imported is not None:
        back = (f"/transcripts/{trace_id}", "Transcript")
    return {
        "trace": trace,
        "trace_id": trace_id,
        "total_events": len(events),
        "back": back,
        "language": language,
    }


@router.get("/sessions/{id}/trace", response_class=HTMLResponse)
async def session_trace_page(
    session_id: Annotated[UUID, Path(alias="id", description="The session's id.")],
    request: Request,
) -> HTMLResponse:
    """Every trace of a live session as one timeline, in log order."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(_session_trace_view, runtime, str(session_id))
    return render(request, "trace.html", title=f"Trace of session {str(session_id)[:8]}", **view)


def _session_trace_view(runtime: Runtime, session_id: str) -> dict[str, Any]:
    feed = session_feed(runtime, session_id)
    stored = read_events(runtime.db, feed.traces, limit=MAX_EVENTS + 1)
    events = [(seq, feed.agent_of(trace), orjson.loads(body)) for seq, trace, body in stored]
    language = runtime.settings.agent.language
    names = runtime.agents.names()
    return {
        "trace": build_trace(events[:MAX_EVENTS], names, language),
        "trace_id": session_id,
        "total_events": len(events),
        "back": (f"/sessions/{session_id}", "Session"),
        "language": language,
    }
