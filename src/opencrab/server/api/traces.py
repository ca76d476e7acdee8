"""`GET /api/traces/{trace_id}/events`: a trace's AgentEvents in seed-000 form."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from fastapi import APIRouter, FastAPI, Query
from fastapi.responses import Response

from opencrab.errors import NotFoundError
from opencrab.events import EVENTS_ADAPTER, AgentEvent
from opencrab.plugins import hookimpl
from opencrab.server.deps import EventLogDep
from opencrab.server.schemas import error_responses

router = APIRouter(prefix="/api", tags=["Traces"])


@router.get(
    "/traces/{trace_id}/events",
    operation_id="listTraceEvents",
    response_model=list[AgentEvent],
    responses=error_responses(400, 404),
)
def list_trace_events(
    trace_id: UUID,
    log: EventLogDep,
    view: Literal["all", "context"] = Query(
        "all", description="`context` leaves out the token_usage sidecars (the LLM history)."
    ),
) -> Response:
    """The trace's events ordered along the parent chain, in the seed's JSON form."""
    events = log.trace(trace_id)
    if not events:
        raise NotFoundError(f"trace {trace_id} has no events")
    if view == "context":
        events = [e for e in events if e.is_context_event]
    return Response(EVENTS_ADAPTER.dump_json(events), media_type="application/json")


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
