"""Tickets (seed 002 `/api/tickets`): list, read, create, delete, resume and reset.

The shapes and operationIds are seed 002's OpenAPI document (TicketSummary with the
agent's name, TicketResponse with steps in index order and `currentSessionId`). Resume
continues the SAME session of a `suspended` ticket (any other status: 400); reset
archives the current session and puts the ticket back to `pending` with its steps kept,
so the scheduler starts a new session (GAP-001). The rules are in `opencrab.tickets`.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI, Query, Response
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.errors import NotFoundError, ValidationError
from opencrab.plugins import hookimpl
from opencrab.reports import tickets
from opencrab.reports.tickets import TicketListItem, TicketResponse
from opencrab.server.deps import AGENT_REF, RuntimeDep, record_id
from opencrab.server.schemas import ApiInput, Offset, error_responses
from opencrab.tickets import service
from opencrab.tickets.states import TicketStatus

router = APIRouter(prefix="/api", tags=["Tickets"])

TicketId = Annotated[UUID, Depends(record_id("ticket"))]


class CreateTicketRequest(ApiInput):
    agent_id: str = Field(min_length=1, max_length=MAX_NAME, description=AGENT_REF)
    params: dict[str, Any] = Field(default_factory=dict, description="The user's input.")
    context: dict[str, Any] = Field(default_factory=dict, description="Goal and constraints.")


@router.get(
    "/tickets",
    operation_id="listTickets",
    response_model=list[TicketListItem],
    responses=error_responses(400),
)
def list_all(
    runtime: RuntimeDep,
    status: TicketStatus | None = None,
    agent_id: Annotated[
        str | None,
        Query(alias="agentId", min_length=1, max_length=MAX_NAME, description=AGENT_REF),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> list[TicketListItem]:
    """Tickets, newest first, each with its goal and step progress; `status` and `agentId`
    narrow the list. An agent id that matches no agent has no tickets (an empty list); a
    value that is neither an id nor an agent's name is refused (400), as seed 002's
    contract (`agentId` is a UUID) asks."""
    agent = None
    if agent_id is not None:
        try:
            agent = runtime.agents.get(agent_id).id
        except NotFoundError:
            if not _is_uuid(agent_id):
                raise ValidationError(
                    f"agentId {agent_id!r} is neither an agent id (a UUID) nor an agent's name"
                ) from None
            return []
    found = service.list_tickets(
        runtime.db, status=status, agent_id=agent, limit=limit, offset=offset
    )
    return tickets.list_items(runtime, found)


@router.post(
    "/tickets",
    operation_id="createTicket",
    status_code=201,
    response_model=TicketResponse,
    responses=error_responses(400, 404),
)
def create(body: CreateTicketRequest, runtime: RuntimeDep) -> TicketResponse:
    """Create a `pending` ticket for an agent (by id or name; unknown: 404). `params` or
    `context` over 64 KiB as JSON, or nesting deeper than 16 levels, is refused (400)."""
    agent = runtime.agents.get(body.agent_id)
    ticket = service.create_ticket(runtime.db, agent.id, params=body.params, context=body.context)
    return tickets.ticket_response(ticket)


@router.get(
    "/tickets/{id}",
    operation_id="getTicket",
    response_model=TicketResponse,
    responses=error_responses(400, 404),
)
def get(ticket_id: TicketId, runtime: RuntimeDep) -> TicketResponse:
    """One ticket with its steps in index order and its current session."""
    return tickets.ticket_response(service.get_ticket(runtime.db, str(ticket_id)))


@router.delete(
    "/tickets/{id}",
    operation_id="deleteTicket",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 404),
)
def delete(ticket_id: TicketId, runtime: RuntimeDep) -> Response:
    """Delete the ticket with its steps, sessions and their messages."""
    service.delete_ticket(runtime.db, str(ticket_id))
    return Response(status_code=204)


@router.patch(
    "/tickets/{id}/resume",
    operation_id="resumeTicket",
    response_model=TicketResponse,
    responses=error_responses(400, 404),
)
def resume(ticket_id: TicketId, runtime: RuntimeDep) -> TicketResponse:
    """Resume a `suspended` ticket in the same session (ticket `running`, session `active`)
    for the scheduler to continue; 400 `invalid_ticket_state` from any other status."""
    return tickets.ticket_response(service.resume_ticket(runtime.db, str(ticket_id)))


@router.patch(
    "/tickets/{id}/reset",
    operation_id="resetTicket",
    response_model=TicketResponse,
    responses=error_responses(400, 404),
)
def reset(ticket_id: TicketId, runtime: RuntimeDep) -> TicketResponse:
    """Reset the ticket to `pending`: its current session is archived as `completed`, its
    steps are kept, and the scheduler starts a new session."""
    return tickets.ticket_response(service.reset_ticket(runtime.db, str(ticket_id)))


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return True
