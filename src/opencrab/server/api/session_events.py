"""`GET /api/sessions/{id}/events`: a session's AgentEvents with their place in the log.

Every trace of the session is included (a discussion's participants' traces and its own,
where people's posts go), oldest first, each as `{"seq", "agentId", "event"}`: `seq`
orders events across traces and is the cursor the WebSocket's `subscribe` resumes after
(`afterSeq`); `agentId` names the agent whose trace it is (None for a person's post).
`limit` takes the oldest of the range, or with `newest=true` the newest (a live view's
tail; `beforeSeq` pages back from there).
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, FastAPI, Path, Query
from fastapi.responses import Response
from pydantic import Field

from opencrab.plugins import hookimpl
from opencrab.server.deps import RuntimeDep
from opencrab.server.schemas import MAX_SQL_INTEGER, ApiModel, error_responses
from opencrab.server.session_feed import read_events, session_feed

router = APIRouter(prefix="/api", tags=["Sessions"])

MAX_PAGE = 1000


class SessionEvent(ApiModel):
    seq: int = Field(description="The event's place in the log (the WebSocket's cursor).")
    agent_id: UUID | None = Field(description="The agent whose trace it is; None: a person.")
    event: dict[str, Any] = Field(
        description="The AgentEvent in seed 000's form (id, trace_id, parent_id, timestamp, "
        "type, content, metadata), as listTraceEvents gives it."
    )


@router.get(
    "/sessions/{id}/events",
    operation_id="listSessionEvents",
    response_model=list[SessionEvent],
    responses=error_responses(400, 404),
)
def list_session_events(
    session_id: Annotated[UUID, Path(alias="id", description="The session's id.")],
    runtime: RuntimeDep,
    after_seq: Annotated[
        int, Query(alias="afterSeq", ge=0, le=MAX_SQL_INTEGER, description="Only after it.")
    ] = 0,
    before_seq: Annotated[
        int, Query(alias="beforeSeq", ge=1, le=MAX_SQL_INTEGER, description="Only before it.")
    ] = MAX_SQL_INTEGER,
    newest: Annotated[
        bool, Query(description="The newest `limit` events of the range, not the oldest.")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 200,
) -> Response:
    """The session's events between afterSeq and beforeSeq, oldest first."""
    feed = session_feed(runtime, str(session_id))
    rows = read_events(
        runtime.db,
        feed.traces,
        after_seq=after_seq,
        before_seq=before_seq,
        newest=newest,
        limit=limit,
    )
    parts = []
    for seq, trace, body in rows:
        agent = feed.agent_of(trace)
        who = b"null" if agent is None else b'"' + agent.encode() + b'"'
        parts.append(b'{"seq":%d,"agentId":%s,"event":%s}' % (seq, who, body))
    return Response(b"[" + b",".join(parts) + b"]", media_type="application/json")


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
