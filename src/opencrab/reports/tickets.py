"""Tickets as the API and the Tickets page list and show them (seed 002's TicketSummary
with the agent's name, TicketResponse with steps in index order and `currentSessionId`),
from the ticket service's records."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from opencrab.core.runtime import Runtime
from opencrab.reports.model import ApiModel
from opencrab.store.repositories.tickets import (
    StepRecord,
    TicketOverview,
    TicketRecord,
    TicketSummaryRecord,
)
from opencrab.tickets import service
from opencrab.tickets.states import StepStatus, TicketStatus

MAX_GOAL_SHOWN = 200
"""A listed ticket's goal is cut to this many characters (the whole one is in its context)."""


class StepResponse(ApiModel):
    index: int = Field(ge=0)
    title: str
    status: StepStatus
    result: dict[str, Any] | None = None
    created_at: datetime
    updated_at: datetime


class TicketSummary(ApiModel):
    id: UUID
    agent_id: UUID
    agent_name: str
    status: TicketStatus
    created_at: datetime
    updated_at: datetime


class TicketListItem(TicketSummary):
    """A listed ticket: seed 002's TicketSummary, plus its goal and step progress."""

    goal: str | None = Field(
        default=None, description="The context's `goal` (its first 200 characters), if any."
    )
    step_count: int = Field(default=0, description="How many steps the ticket has.")
    steps_completed: int = Field(default=0, description="How many of them are completed.")


class TicketResponse(TicketSummary):
    params: dict[str, Any] = Field(description="The user's input parameters (free-form JSON).")
    context: dict[str, Any] = Field(description="The task's definition: goal, constraints.")
    error_message: str | None = Field(description="Why the ticket failed (GAP-008).")
    steps: list[StepResponse] = Field(description="The ticket's steps in index order.")
    current_session_id: UUID | None = Field(
        description="The session of the ticket's current run; null while it is pending."
    )


def summary_of(record: TicketSummaryRecord) -> TicketSummary:
    """A stored ticket as `GET /api/tickets` lists it."""
    return TicketSummary(
        id=UUID(record.id),
        agent_id=UUID(record.agent_id),
        agent_name=record.agent_name,
        status=record.status,  # type: ignore[arg-type]  # the table's CHECK keeps it one
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def list_item_of(record: TicketSummaryRecord, overview: TicketOverview | None) -> TicketListItem:
    """A stored ticket and its overview (service.ticket_overviews) as the list shows it."""
    item = TicketListItem(**summary_of(record).model_dump())
    if overview is not None:
        goal = None if overview.goal is None else overview.goal[:MAX_GOAL_SHOWN]
        item.goal = goal
        item.step_count = overview.step_count
        item.steps_completed = overview.steps_completed
    return item


def _step(step: StepRecord) -> StepResponse:
    return StepResponse.model_validate(step.__dict__)


def ticket_response(record: TicketRecord) -> TicketResponse:
    """A stored ticket, whole, as `GET /api/tickets/{id}` shows it."""
    current = record.current_session_id
    return TicketResponse(
        **summary_of(record).model_dump(),
        params=record.params,
        context=record.context,
        error_message=record.error_message,
        steps=[_step(s) for s in record.steps],
        current_session_id=None if current is None else UUID(current),
    )


def list_items(runtime: Runtime, found: Sequence[TicketSummaryRecord]) -> list[TicketListItem]:
    """Listed tickets, each with its goal and step progress (service.ticket_overviews)."""
    overviews = service.ticket_overviews(runtime.db, [t.id for t in found])
    return [list_item_of(t, overviews.get(t.id)) for t in found]


def ticket_view(runtime: Runtime, ticket_id: str) -> TicketResponse:
    """One stored ticket, whole, as `GET /api/tickets/{id}` shows it."""
    return ticket_response(service.get_ticket(runtime.db, ticket_id))
