"""Costs: the fleet's LLM cost and quality dashboard (issue 21 point 2).

The page renders the totals, the per-model and per-provider tables and the filter bar
on the server (readable without JavaScript) from the same report functions the
`/api/analytics/llm/*` routes answer with; static/js/costs.js draws the charts from
those JSON routes with the page's filter and keeps the URL, the totals and the export
links in step when the filter changes.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.reports.llm_costs import costs_page
from opencrab.server.usage_filter import UsageFilterDep

router = APIRouter()

DAY_CHOICES = (7, 14, 30, 90, 365)
FILTER_PARAMS = ("from", "to", "days", "agentId", "purpose", "provider", "model", "source")


@router.get("/costs", response_class=HTMLResponse)
async def costs(request: Request, flt: UsageFilterDep) -> HTMLResponse:
    """Totals, tables and chart frames for the filter in the query string."""
    runtime: Runtime = request.app.state.runtime
    data = await run_blocking(costs_page, runtime.db, flt)
    query = {k: v for k, v in request.query_params.items() if k in FILTER_PARAMS and v}
    days = query.get("days") or ("" if "from" in query or "to" in query else "30")
    return render(
        request,
        "costs.html",
        title="Costs",
        query=query,
        query_string=str(request.query_params),
        days=days,
        day_choices=[(n, f"Last {n} days") for n in DAY_CHOICES],
        flt=flt,
        **data,
    )
