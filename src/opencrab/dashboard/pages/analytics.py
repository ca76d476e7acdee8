"""Analytics (seed 001 "6. 分析・統計"): the fleet's page and each agent's tab.

Both show lines spoken per day, heartbeat decisions, learning (skills written and
reflections), skill use and effectiveness, and the relationship graph from impressions
with who answered whom in discussions. The figures come from the builders the JSON
routes call (opencrab.reports.charts), so the tables under the charts read
without JavaScript; static/js/analytics.js draws the charts from those same routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.reports import charts
from opencrab.reports.analytics import skill_analytics
from opencrab.store import Database

router = APIRouter()

PagePeriod = Annotated[Literal["day", "week", "month", "all"], Query()]
PERIODS = (
    ("day", "Last 24 hours"),
    ("week", "Last 7 days"),
    ("month", "Last 30 days"),
    ("all", "All time"),
)


def _figures(db: Database, agent_id: str | None, period: str) -> dict[str, Any]:
    return {
        "messages": charts.messages_series(db, agent_id, period),
        "heartbeats": charts.heartbeat_series(db, agent_id, period),
        "learning": charts.learning_series(db, agent_id, period),
        "graph": charts.relationships(db, agent_id, period),
    }


def _langs(request: Request, graph: charts.Relationships) -> dict[str, str]:
    """Each agent's language (its own, else the server's) for `lang` on its text."""
    default = request.app.state.runtime.settings.agent.language
    return {node.id: node.language or default for node in graph.nodes}


@router.get("/analytics", response_class=HTMLResponse)
async def fleet_analytics(request: Request, period: PagePeriod = "month") -> HTMLResponse:
    """Every agent's activity, learning, skills and relations."""
    db = request.app.state.runtime.db
    figures = await run_blocking(_figures, db, None, period)
    skills = await run_blocking(charts.fleet_skills, db, period)
    return render(
        request,
        "analytics.html",
        title="Analytics",
        agent=None,
        api="/api/analytics",
        period=period,
        periods=PERIODS,
        skills=skills.skills,
        langs=_langs(request, figures["graph"]),
        **figures,
    )


@router.get("/agents/{name}/analytics", response_class=HTMLResponse)
async def agent_analytics(
    agent: PageAgent, request: Request, period: PagePeriod = "month"
) -> HTMLResponse:
    """One agent's activity, learning, skills and relations."""
    runtime = request.app.state.runtime
    figures = await run_blocking(_figures, runtime.db, agent.id, period)
    skills = await run_blocking(skill_analytics, runtime, runtime.db, agent, period)
    return render(
        request,
        "agent_analytics.html",
        title=f"Analytics · {agent.name}",
        agent=agent,
        tab="analytics",
        api=f"/api/agents/{quote(agent.id, safe='')}/analytics",
        period=period,
        periods=PERIODS,
        skills=skills.skills,
        langs=_langs(request, figures["graph"]),
        **figures,
    )
