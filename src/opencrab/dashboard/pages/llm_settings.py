"""LLM settings and monitoring (seed 001 "LLM設定画面", "LLMモニタリング"): `/settings/llm`,
and each agent's LLM configuration: `/agents/{name}/llm`.

The settings page renders what `GET /api/llm/settings`, `/api/llm/settings/audit` and
`/api/llm/monitoring` answer (the same functions); every change goes through the REST
API (`PATCH /api/llm/providers/{name}`, `PUT /api/llm/aliases/{alias}`, `PUT
/api/llm/fallback`, `POST /api/llm/providers/{name}/test`, `PUT
/api/agents/{id}/llm/config`), sent by dashboard.js forms and `static/js/llm_settings.js`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.config.models import PURPOSES
from opencrab.core.runtime import Runtime
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.llm.registry import provider_names
from opencrab.offload import run_blocking
from opencrab.reports.llm_costs import percentile_note
from opencrab.reports.llm_monitoring import monitoring
from opencrab.reports.llm_settings import settings_view
from opencrab.server.schemas import Period

router = APIRouter()

PERIODS = (
    ("day", "Last 24 hours"),
    ("week", "Last 7 days"),
    ("month", "Last 30 days"),
    ("all", "All time"),
)
AUDIT_ROWS = 20


@router.get("/settings/llm", response_class=HTMLResponse)
async def llm_settings(request: Request, period: Period = "week") -> HTMLResponse:
    """Providers, keys, aliases, the fallback chain, recent changes and monitoring."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(settings_view, runtime)
    audit = await run_blocking(runtime.llm_settings.audit_log, AUDIT_ROWS, 0)
    usage = await run_blocking(monitoring, runtime.db, period)
    return render(
        request,
        "llm_settings.html",
        title="LLM settings",
        view=view,
        audit=audit,
        usage=usage,
        percentile_note=percentile_note(filtered=False),
        period=period,
        periods=PERIODS,
        provider_names=provider_names(),
        aliases=sorted(runtime.router.aliases),
    )


@router.get("/agents/{name}/llm", response_class=HTMLResponse)
async def agent_llm(agent: PageAgent, request: Request) -> HTMLResponse:
    """The agent's LLM configuration (GET/PUT /api/agents/{id}/llm/config)."""
    runtime: Runtime = request.app.state.runtime
    return render(
        request,
        "agent_llm.html",
        title=f"LLM · {agent.name}",
        agent=agent,
        tab="llm",
        config=agent.llm_config,
        purposes=PURPOSES,
        provider_names=provider_names(),
        aliases=sorted(runtime.router.aliases),
        server_aliases=runtime.settings.llm.self_selection.allowed_aliases,
    )
