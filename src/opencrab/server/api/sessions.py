"""Sessions and their messages (seed 002 `/api/sessions`, seed 001 chat sessions).

`GET /api/sessions` lists tickets' sessions unless `kind` asks for chats, discussions or
all: seed 002's SessionSummary requires a `ticketId`, which only a ticket's session has.
A path id that is no UUID is 404, as the seed documents.

`POST /api/sessions/{id}/messages` is the REST gateway: the user message becomes an
`IncomingMessage` with a `RestSource` and the agent runs a turn. The answer is 201 with
seed 002's MessageResponse of the stored user message (`id`, `role`, `content`,
`timestamp`) and, in `turn`, what the agent did: its reply, actions, trace id and how the
turn stopped. One turn per session at a time: a second message to the same session waits
for the first to finish, in this process or another (the seed declares no 409). In a
ticket's session the message is a person's answer
(opencrab.tickets.service.answer_ticket_session): a suspended ticket resumes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, FastAPI, Query, Response
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import (
    check_chat_open,
    end_session,
    ensure_chat_session,
    hold_turn,
    session_state,
)
from opencrab.core.steps import SessionMessage, Spoke, TurnResult, TurnStarted
from opencrab.errors import OpenCrabError
from opencrab.messages import MessageText, RestSource, Sender
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import sessions
from opencrab.reports.sessions import (
    MessageResponse,
    SessionKind,
    SessionResponse,
    SessionStatus,
    SessionSummary,
)
from opencrab.server.deps import AGENT_REF, RuntimeDep, record_id
from opencrab.server.schemas import AfterId, ApiInput, ApiModel, Offset, error_responses
from opencrab.tickets.service import answer_ticket_session

router = APIRouter(prefix="/api", tags=["Sessions"])

SessionId = Annotated[UUID, Depends(record_id("session"))]


class CreateSessionRequest(ApiInput):
    agent_id: str = Field(min_length=1, max_length=MAX_NAME, description=AGENT_REF)


class AddMessageRequest(ApiInput):
    content: MessageText
    sender_id: str | None = Field(default=None, max_length=200)
    sender_name: str | None = Field(default=None, max_length=200)


class ActionSummary(ApiModel):
    name: str
    arguments: Any = None
    success: bool
    output: str
    call_event_id: UUID
    result_event_id: UUID


class TurnOutcome(ApiModel):
    """What the agent did with a posted message: its reply (None when it stayed silent)."""

    session_id: UUID
    trace_id: UUID
    reply: MessageResponse | None
    actions: list[ActionSummary]
    iterations: int
    stopped_by: str | None
    error: str | None = None
    approval_id: UUID | None = Field(
        default=None,
        description='stoppedBy "approval": the call waiting for a person (/api/approvals).',
    )
    waiting: str | None = Field(
        default=None,
        description='stoppedBy "approval": what waits and where to decide it; once decided '
        "the agent's answer follows in this session (its messages).",
    )


class PostedMessage(MessageResponse):
    """Seed 002's MessageResponse of the stored user message, plus the turn it started
    (None in a ticket's session: the ticket scheduler runs its next turn)."""

    turn: TurnOutcome | None = None


@router.get(
    "/sessions",
    operation_id="listSessions",
    response_model=list[SessionSummary],
    responses=error_responses(400, 404),
)
def list_all(
    runtime: RuntimeDep,
    agent_id: Annotated[
        str | None,
        Query(alias="agentId", min_length=1, max_length=MAX_NAME, description=AGENT_REF),
    ] = None,
    ticket_id: Annotated[UUID | None, Query(alias="ticketId")] = None,
    kind: Annotated[
        SessionKind | Literal["all"],
        Query(
            description="ticket (left out: seed 002's list, where every session has its "
            "ticketId), chat, discussion, or all of them."
        ),
    ] = "ticket",
    status: SessionStatus | None = None,
    q: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Text found in the title (any case)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> list[SessionSummary]:
    """Sessions of one kind (tickets' unless `kind` says otherwise), most recently updated
    first. `agentId` lists the agent's own sessions and the discussions it takes part in."""
    return sessions.find_sessions(
        runtime,
        agent=agent_id,
        ticket_id=ticket_id,
        kind=kind,
        status=status,
        text=q,
        limit=limit,
        offset=offset,
    )


@router.post(
    "/sessions",
    operation_id="createSession",
    status_code=201,
    response_model=SessionResponse,
    responses=error_responses(400, 404),
)
def create(body: CreateSessionRequest, runtime: RuntimeDep) -> SessionResponse:
    """Start a chat session with an agent (by id or name)."""
    agent = runtime.agents.get(body.agent_id)
    session_id = ensure_chat_session(runtime.db, agent.id)
    return sessions.session_view(runtime, session_id)


@router.get(
    "/sessions/{id}",
    operation_id="getSession",
    response_model=SessionResponse,
    responses=error_responses(400, 404),
)
def get(session_id: SessionId, runtime: RuntimeDep) -> SessionResponse:
    """One session with its messages."""
    return sessions.session_view(runtime, str(session_id))


@router.delete(
    "/sessions/{id}",
    operation_id="endSession",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 404),
)
def end(session_id: SessionId, runtime: RuntimeDep) -> Response:
    """End the session (status completed); its history stays readable."""
    end_session(runtime.db, str(session_id))
    return Response(status_code=204)


@router.get(
    "/sessions/{id}/messages",
    operation_id="listMessages",
    response_model=list[MessageResponse],
    responses=error_responses(400, 404),
)
def list_messages(
    session_id: SessionId,
    runtime: RuntimeDep,
    after_id: AfterId = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[MessageResponse]:
    """The session's messages in order; `afterId` returns only newer ones."""
    return sessions.messages(runtime, str(session_id), after_id=after_id, limit=limit)


@router.post(
    "/sessions/{id}/messages",
    operation_id="addMessage",
    status_code=201,
    response_model=PostedMessage,
    responses=error_responses(400, 404),
)
async def add_message(
    session_id: SessionId, body: AddMessageRequest, runtime: RuntimeDep
) -> PostedMessage:
    """Add a user message to a chat session (201: the stored message); the agent runs a
    turn, whose reply and actions come back in `turn`. While another process runs a
    turn in the session, the message waits for it to end (seed 002 declares no 409).

    In a ticket's session the message is a person's answer: stored, and a `suspended`
    ticket resumes in that session for its scheduler to continue (no `turn` here)."""
    state = session_state(runtime.db, str(session_id))  # one short read, on the loop
    if state.kind == "ticket":
        return await _answer_ticket(runtime, str(session_id), body)
    check_chat_open(str(session_id), state)
    agent = runtime.agents.get(str(state.agent_id))
    sender = Sender(id=body.sender_id or "user", name=body.sender_name)
    user: SessionMessage | None = None
    reply: SessionMessage | None = None
    result: TurnResult | None = None
    async for step in runtime.turns.chat_steps(
        agent,
        body.content,
        session_id=str(session_id),
        source=RestSource(request_id=str(uuid4())),
        sender=sender,
        create=False,
        wait_busy=True,
    ):
        if isinstance(step, TurnStarted):
            user = step.user_message
        elif isinstance(step, Spoke):
            reply = step.message
        elif isinstance(step, TurnResult):
            result = step
    assert result is not None
    if user is None:  # the engine writes it before anything else can fail
        raise OpenCrabError(f"the message to session {result.session_id} was not stored")
    waiting = None
    if result.approval_id is not None:
        waiting = await run_blocking(runtime.approvals.notice, result.approval_id)
    return _turn_response(result, user, reply, waiting)


async def _answer_ticket(
    runtime: Runtime, session_id: str, body: AddMessageRequest
) -> PostedMessage:
    # never inside one of its turns; another process's turn there is waited for
    async with hold_turn(runtime.leases, session_id, wait=True):
        row = await run_blocking(
            answer_ticket_session,
            runtime.db,
            session_id,
            body.content,
            sender_id=body.sender_id or "user",
            sender_name=body.sender_name,
        )
    return PostedMessage(**sessions.message_response(row).model_dump())


def _turn_response(
    result: TurnResult, user: SessionMessage, reply: SessionMessage | None, waiting: str | None
) -> PostedMessage:
    """The posted message and its turn, from what the turn's steps say they wrote."""
    actions = [
        ActionSummary(
            name=a.name,
            arguments=a.arguments,
            success=a.result.success,
            output=a.result.output(),
            call_event_id=UUID(a.call_event_id),
            result_event_id=UUID(a.result_event_id),
        )
        for a in result.actions
    ]
    outcome = TurnOutcome(
        session_id=UUID(result.session_id),
        trace_id=UUID(result.trace_id),
        reply=None if reply is None else sessions.message_response(reply),
        actions=actions,
        iterations=result.iterations,
        stopped_by=result.stopped_by,
        error=None if result.error is None else result.error.message,
        approval_id=None if result.approval_id is None else UUID(result.approval_id),
        waiting=waiting,
    )
    return PostedMessage(**sessions.message_response(user).model_dump(), turn=outcome)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
