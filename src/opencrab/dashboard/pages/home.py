"""Home: one card per agent, with its status, today's spend and its counts; above them the
providers the settings use that still need an API key, and the budget alerts.

The cards come from opencrab.core.overview, the service `GET /api/agent-overview`
answers with, so the page and the API never disagree. `/agent-cards` is the cards alone
(the HTMX fragment the page polls to keep the status live). Creating and deleting an
agent go through `POST /api/agents` and `DELETE /api/agents/{id}` from the page's script.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.overview import AgentOverview, agent_overview
from opencrab.core.runtime import Runtime
from opencrab.dashboard.pages.budgets import budget_alerts
from opencrab.dashboard.render import fragment, render
from opencrab.offload import run_blocking
from opencrab.server.deps import heartbeat_scheduler

router = APIRouter()

ROLES = ("discussant", "facilitator", "observer")
"""The roles the create form offers (a custom role is set on the persona page)."""


async def _cards(request: Request) -> list[AgentOverview]:
    runtime: Runtime = request.app.state.runtime
    return await agent_overview(runtime, heartbeat_scheduler(request))


@router.get("/", response_class=HTMLResponse)
async def home(request: Request) -> HTMLResponse:
    """Every agent as a card, and the form that creates one."""
    runtime: Runtime = request.app.state.runtime
    return render(
        request,
        "home.html",
        title="Agents",
        cards=await _cards(request),
        alerts=await budget_alerts(runtime),
        keys_needed=await run_blocking(runtime.llm_settings.keys_missing),
        roles=ROLES,
        server_language=runtime.settings.agent.language,
    )


@router.get("/agent-cards", response_class=HTMLResponse)
async def agent_cards(request: Request) -> HTMLResponse:
    """The cards alone, for the page to swap in (live status)."""
    return fragment(request, "_agent_cards.html", cards=await _cards(request))
