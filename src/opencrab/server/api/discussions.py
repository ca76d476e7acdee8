"""Discussions (seed 001): start, follow, join and steer agents' discussions.

`POST /api/discussions` starts one and the server runs it to its end in the background
(core.discussion.DiscussionRunner; claimed by lease, so a worker or another server on
the same database goes on with it if this process stops); `GET /api/discussions/{id}`
shows its state with every message naming its speaker, `GET …/messages?afterId=` follows it, `POST
…/messages` lets a person speak into it (seed 001 "介入機能（メンター指示）": every
participant hears it in its next turn), `POST …/participants` adds an agent, `DELETE`
ends it. Agents are named by id or name. The WebSocket (`/api/ws`) offers the same.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, FastAPI, Path, Query, Request, Response
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.core.discussion import (
    DEFAULT_MAX_TURNS,
    MAX_PARTICIPANTS,
    Discussion,
    DiscussionRunner,
)
from opencrab.core.identity import AgentRole
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import list_sessions
from opencrab.messages import MessageText
from opencrab.plugins import hookimpl
from opencrab.reports.sessions import MessageResponse, message_response
from opencrab.server.deps import AGENT_REF, RuntimeDep
from opencrab.server.schemas import AfterId, ApiInput, ApiModel, Offset, error_responses

router = APIRouter(prefix="/api", tags=["Discussions"])

DiscussionId = Annotated[UUID, Path(alias="id", description="The discussion's session id.")]
AgentRef = Annotated[str, Field(min_length=1, max_length=200, description="Agent id or name.")]


class Participant(ApiModel):
    agent_id: UUID
    name: str
    role: Literal["participant", "facilitator"]
    done_declared: bool
    trace_id: UUID = Field(description="The agent's own trace in the discussion (its events).")


class DiscussionSummary(ApiModel):
    id: UUID
    theme: str
    mode: Literal["autonomous", "facilitated"]
    phase: str
    status: str
    turn: int = Field(description="Turns taken so far.")
    max_turns: int | None
    ended_by: str | None = None
    running: bool = Field(description="This server is driving it right now.")
    created_at: datetime
    updated_at: datetime


class DiscussionResponse(DiscussionSummary):
    participants: list[Participant]
    messages: list[MessageResponse]


class StartDiscussionRequest(ApiInput):
    theme: str = Field(min_length=1, max_length=2_000)
    participants: list[AgentRef] = Field(min_length=1, max_length=MAX_PARTICIPANTS)
    mode: Literal["autonomous", "facilitated"] | None = Field(
        default=None, description="Default: facilitated when a facilitator is given."
    )
    facilitator: AgentRef | None = None
    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=1000)


class PostRequest(ApiInput):
    content: MessageText
    sender_id: str | None = Field(default=None, max_length=200)
    sender_name: str | None = Field(default=None, max_length=200)


class JoinRequest(ApiInput):
    agent: AgentRef


def runner_of(request: Request) -> DiscussionRunner:
    runner: DiscussionRunner = request.app.state.discussions
    return runner


async def start_discussion(
    runtime: Runtime,
    runner: DiscussionRunner,
    *,
    theme: str,
    participants: list[str],
    mode: str | None,
    facilitator: str | None,
    max_turns: int,
) -> Discussion:
    """Create a discussion between agents (ids or names) and start running it."""
    members = [runtime.agents.get(p) for p in participants]
    lead = runtime.agents.get(facilitator) if facilitator else None
    if lead is not None and lead.role != AgentRole.facilitator():
        identity = lead.identity.model_copy(update={"role": AgentRole.facilitator()})
        runtime.agents.save_identity(lead.id, identity)
    discussion = Discussion.create(
        runtime.db,
        theme=theme,
        participants=[m.id for m in members],
        mode=mode or ("facilitated" if lead else "autonomous"),
        facilitator_id=lead.id if lead else None,
        max_turns=max_turns,
    )
    return await runner.start(discussion)


def describe(runtime: Runtime, runner: DiscussionRunner, discussion: Discussion) -> dict[str, Any]:
    """The discussion's state as the API shows it (camelCase by the response model)."""
    done = discussion.done_declared()
    names = {a.id: a.name for a in runtime.agents.list()}
    people = [
        {
            "agent_id": agent_id,
            "name": names.get(agent_id, agent_id),
            "role": "facilitator" if agent_id == discussion.facilitator_id else "participant",
            "done_declared": done.get(agent_id, False),
            "trace_id": discussion.trace_for(agent_id),
        }
        for agent_id in discussion.everyone
    ]
    return {
        **_summary(runner, discussion),
        "participants": people,
        "messages": [message_response(m) for m in discussion.transcript()],
    }


def _summary(runner: DiscussionRunner, discussion: Discussion) -> dict[str, Any]:
    return {
        "id": discussion.id,
        "theme": discussion.theme,
        "mode": discussion.mode,
        "phase": discussion.phase,
        "status": discussion.status,
        "turn": discussion.turn_number,
        "max_turns": discussion.max_turns,
        "ended_by": discussion.context.get("ended_by"),
        "running": runner.running(discussion.id),
        "created_at": discussion.created_at,
        "updated_at": discussion.updated_at,
    }


@router.post(
    "/discussions",
    operation_id="startDiscussion",
    status_code=201,
    response_model=DiscussionResponse,
    responses=error_responses(400, 404, 422),
)
async def start(body: StartDiscussionRequest, request: Request, runtime: RuntimeDep) -> Any:
    """Start a discussion between agents; the server runs it until it ends."""
    runner = runner_of(request)
    discussion = await start_discussion(
        runtime,
        runner,
        theme=body.theme,
        participants=body.participants,
        mode=body.mode,
        facilitator=body.facilitator,
        max_turns=body.max_turns,
    )
    return describe(runtime, runner, discussion)


@router.get(
    "/discussions",
    operation_id="listDiscussions",
    response_model=list[DiscussionSummary],
    responses=error_responses(400, 404, 422),
)
def list_all(
    request: Request,
    runtime: RuntimeDep,
    agent_id: Annotated[
        str | None,
        Query(alias="agentId", min_length=1, max_length=MAX_NAME, description=AGENT_REF),
    ] = None,
    status: Literal["active", "completed"] | None = None,
    q: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Text found in the theme (any case)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> Any:
    """Discussions, most recently updated first; `agentId`: those the agent takes part in."""
    runner = runner_of(request)
    rows = list_sessions(
        runtime.db,
        kind="discussion",
        agent_id=None if agent_id is None else runtime.agents.get(agent_id).id,
        status=status,
        text=q,
        limit=limit,
        offset=offset,
    )
    return [_summary(runner, Discussion.load(runtime.db, str(r.id))) for r in rows]


@router.get(
    "/discussions/{id}",
    operation_id="getDiscussion",
    response_model=DiscussionResponse,
    responses=error_responses(404, 422),
)
def get(discussion_id: DiscussionId, request: Request, runtime: RuntimeDep) -> Any:
    """A discussion: its state, participants and every message with its speaker."""
    discussion = Discussion.load(runtime.db, str(discussion_id))
    return describe(runtime, runner_of(request), discussion)


@router.get(
    "/discussions/{id}/messages",
    operation_id="listDiscussionMessages",
    response_model=list[MessageResponse],
    responses=error_responses(404, 422),
)
def messages(
    discussion_id: DiscussionId,
    runtime: RuntimeDep,
    after_id: AfterId = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Any:
    """Who said what, in order; `afterId` returns only what was said since (to follow it)."""
    discussion = Discussion.load(runtime.db, str(discussion_id))
    return [message_response(m) for m in discussion.transcript(after=after_id, limit=limit)]


@router.post(
    "/discussions/{id}/messages",
    operation_id="postToDiscussion",
    status_code=201,
    response_model=MessageResponse,
    responses=error_responses(400, 404, 409, 422),
)
async def post(discussion_id: DiscussionId, body: PostRequest, runtime: RuntimeDep) -> Any:
    """Speak into a running discussion (a mentor's instruction); all participants hear it."""
    discussion = Discussion.load(runtime.db, str(discussion_id))
    speech = discussion.post(
        body.content, sender_id=body.sender_id or "user", sender_name=body.sender_name
    )
    runtime.wrote()
    return message_response(discussion.transcript(after=speech.log_id - 1, limit=1)[0])


@router.post(
    "/discussions/{id}/participants",
    operation_id="joinDiscussion",
    response_model=DiscussionResponse,
    responses=error_responses(400, 404, 409, 422),
)
async def join(
    discussion_id: DiscussionId, body: JoinRequest, request: Request, runtime: RuntimeDep
) -> Any:
    """Add an agent (id or name) to a running discussion."""
    discussion = Discussion.load(runtime.db, str(discussion_id))
    agent = runtime.agents.get(body.agent)
    discussion.join(agent.id)
    hub = getattr(request.app.state, "hub", None)
    if hub is not None:
        hub.follow(discussion.id, discussion.trace_for(agent.id), agent.id)
    return describe(runtime, runner_of(request), discussion)


@router.delete(
    "/discussions/{id}",
    operation_id="stopDiscussion",
    status_code=204,
    response_class=Response,
    responses=error_responses(404, 409, 422),
)
async def stop(discussion_id: DiscussionId, request: Request) -> Response:
    """End a running discussion now (endedBy "stopped"); its messages stay readable."""
    await runner_of(request).stop(str(discussion_id))
    return Response(status_code=204)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
