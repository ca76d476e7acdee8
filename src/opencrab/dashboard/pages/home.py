"""Home: one card per agent."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.dashboard.render import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
async def home(request: Request) -> HTMLResponse:
    """Every agent as a card."""
    agents = request.app.state.runtime.agents.summaries()
    return render(request, "home.html", title="Agents", agents=agents)
