"""Budgets: the fleet's and each agent's caps, spend, forecast, idle cost, slow-burn
alarms (with the numbers behind them) and alerts, with
forms that set the caps through `PUT /api/budgets` and `PUT /api/agents/{id}/budget`.

It reads what `GET /api/budgets` answers (opencrab.reports.budgets.budgets_view), so the page
and the API never disagree. `budget_alerts` is the banner the home page shows.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.budgets import month_start
from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.reports import budgets as reports
from opencrab.reports.budgets import Alert

router = APIRouter()


async def budget_alerts(runtime: Runtime) -> list[Alert]:
    """This month's budget alerts, newest first, for the home page's banner."""
    return await reports.budget_alerts(runtime, month_start(datetime.now(UTC)), 20)


@router.get("/budgets", response_class=HTMLResponse)
async def budgets_page(request: Request) -> HTMLResponse:
    """Caps, spend, forecasts, idle cost and alerts; forms to set the caps."""
    runtime: Runtime = request.app.state.runtime
    view = await reports.budgets_view(runtime)
    languages = {a.id: a.language for a in await run_blocking(runtime.agents.list)}
    return render(
        request,
        "budgets.html",
        title="Budgets",
        view=view,
        languages=languages,
        alarms=runtime.settings.budgets.alarms,
    )
