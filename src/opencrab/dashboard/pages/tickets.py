"""The tickets board (`/tickets`) and one ticket's page (`/tickets/{id}`), seed 002.

The board has a column per ticket status, each read as `GET /api/tickets?status=` reads
it (tickets.service.list_tickets with the list's goals and step progress), narrowed to
one agent by `?agent=`; its "New ticket" form posts to `POST /api/tickets`. A ticket's
page reads what `GET /api/tickets/{id}` and `GET /api/sessions?ticketId=` answer, shows
the current session's events live (the session view's feed, `static/js/live.js` over
`/api/ws`), and refreshes its state part by polling `/tickets/{id}/state`, which answers
204 while the ticket is unchanged. Every change (answer, resume, reset, delete) goes
through the REST API from the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import HTMLResponse

from opencrab.core.agent import MAX_NAME
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.dashboard.pages.session_view import live_view
from opencrab.dashboard.render import fragment, render
from opencrab.errors import NotFoundError
from opencrab.offload import run_blocking
from opencrab.reports import tickets
from opencrab.reports.sessions import SessionSummary, find_sessions
from opencrab.reports.tickets import TicketListItem, TicketResponse
from opencrab.tickets import service
from opencrab.tickets.states import TICKET_STATUSES, TicketStatus

router = APIRouter()

COLUMN_SIZE = 50
"""Tickets a board column shows at most (the newest); the API lists the rest."""

TicketId = Annotated[UUID, Path(alias="id", description="The ticket's id.")]


@dataclass(frozen=True)
class Column:
    status: TicketStatus
    tickets: list[TicketListItem]
    more: bool  # the column holds more than it shows


@router.get("/tickets", response_class=HTMLResponse)
async def board(
    request: Request, agent: Annotated[str, Query(max_length=MAX_NAME)] = ""
) -> HTMLResponse:
    """Every ticket in a column per status, newest first; `agent` shows one agent's."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(_board, runtime, agent.strip())
    return render(request, "tickets.html", title="Tickets", **view)


def _board(runtime: Runtime, agent: str) -> dict[str, Any]:
    names = runtime.agents.names()  # id -> (name, language)
    agent_id: str | None = None
    unknown = False
    if agent:
        try:
            agent_id = runtime.agents.get(agent).id
        except NotFoundError:
            unknown = True
    columns = []
    questions: dict[str, str] = {}
    for status in TICKET_STATUSES:
        found = (
            []
            if unknown
            else service.list_tickets(
                runtime.db, status=status, agent_id=agent_id, limit=COLUMN_SIZE + 1
            )
        )
        shown = found[:COLUMN_SIZE]
        items = tickets.list_items(runtime, shown)
        columns.append(Column(status, items, len(found) > COLUMN_SIZE))
        if status == "suspended":  # a suspended ticket's card shows what it asked
            questions.update(
                (str(t.id), q) for t in shown if (q := _question(runtime, str(t.id))) is not None
            )
    agents = sorted(((name, i, lang) for i, (name, lang) in names.items()), key=lambda a: a[0])
    return {
        "columns": columns,
        "agent": agent,
        "unknown_agent": unknown,
        "agents": agents,
        "languages": {i: lang for i, (_, lang) in names.items()},
        "default_language": runtime.settings.agent.language,
        "questions": questions,
    }


def _question(runtime: Runtime, ticket_id: str) -> str | None:
    """What a suspended ticket's agent last said in its current session: its question."""
    session_id = service.get_ticket(runtime.db, ticket_id).current_session_id
    if session_id is None:
        return None
    said = session_messages(runtime.db, str(session_id), limit=10_000)
    return next((m.content for m in reversed(said) if m.role == "assistant"), None)


@router.get("/tickets/{id}", response_class=HTMLResponse)
async def ticket_page(ticket_id: TicketId, request: Request) -> HTMLResponse:
    """One ticket: its state, steps, sessions and the current session's events, live."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(_ticket_view, runtime, str(ticket_id))
    live = None
    if view["ticket"].current_session_id is not None:
        live = await run_blocking(live_view, runtime, str(view["ticket"].current_session_id), None)
    return render(request, "ticket.html", title=view.pop("heading"), live=live, **view)


@router.get("/tickets/{id}/state", response_class=HTMLResponse)
async def ticket_state(
    ticket_id: TicketId,
    request: Request,
    since: Annotated[str, Query(max_length=64)] = "",
) -> Response:
    """The polled part of a ticket's page; 204 while the ticket is as it was at `since`."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(_ticket_view, runtime, str(ticket_id))
    if since and since == view["version"]:
        return Response(status_code=204)
    return fragment(request, "_ticket_state.html", **view)


def _ticket_view(runtime: Runtime, ticket_id: str) -> dict[str, Any]:
    ticket: TicketResponse = tickets.ticket_view(runtime, ticket_id)
    sessions: list[SessionSummary] = find_sessions(
        runtime, kind="ticket", ticket_id=ticket.id, limit=1000
    )
    names = runtime.agents.names()
    language = names.get(str(ticket.agent_id), ("", runtime.settings.agent.language))[1]
    question = None
    current = None if ticket.current_session_id is None else str(ticket.current_session_id)
    if ticket.status == "suspended" and current is not None:
        said = session_messages(runtime.db, current, limit=10_000)
        question = next((m for m in reversed(said) if m.role == "assistant"), None)
    approvals = []  # the current session's calls waiting for a person, oldest first
    if current is not None:
        held = runtime.approvals.list_approvals(session_id=current, status="pending")
        approvals = [(a, _pretty(a.arguments)) for a in held]
    goal = ticket.context.get("goal")
    title = goal if isinstance(goal, str) and goal.strip() else f"Ticket {str(ticket.id)[:8]}"
    constraints = ticket.context.get("constraints")
    return {
        "ticket": ticket,
        "heading": title,
        "language": language,
        "constraints": constraints if isinstance(constraints, list) else None,
        "context_json": _pretty(ticket.context),
        "params_json": _pretty(ticket.params),
        "steps": [(step, _pretty(step.result)) for step in ticket.steps],
        "sessions": sessions,
        "question": question,
        "approvals": approvals,
        "version": ticket.updated_at.isoformat(),
    }


def _pretty(value: Any) -> str | None:
    """JSON for people: indented, non-ASCII text as it is; None stays None."""
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False)
