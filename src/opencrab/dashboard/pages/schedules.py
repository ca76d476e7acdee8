"""Schedules: every agent's cron, interval and one-shot jobs with their next slot, the
failed runs waiting for a person, the latest runs, and a form that creates one through
`POST /api/agents/{id}/schedules` (pause, resume, run now, delete and acknowledge are the
API's routes too).

It reads what the API answers (opencrab.reports.schedules.schedules_page), so the page
and the API never disagree.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.reports import schedules as reports

router = APIRouter()


@router.get("/schedules", response_class=HTMLResponse)
async def schedules_page(request: Request) -> HTMLResponse:
    """Schedules, failed runs, latest runs; the form to add one."""
    runtime: Runtime = request.app.state.runtime
    view = await run_blocking(reports.schedules_page, runtime)
    languages = {a.id: a.language for a in view.agents}
    return render(request, "schedules.html", title="Schedules", view=view, languages=languages)
