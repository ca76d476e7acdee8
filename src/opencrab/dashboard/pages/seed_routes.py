"""The addresses of seed 001's dashboard route table that have no page of their own.

`/agents` is the home page's list of agents; `/workspace/{agent}` is that agent's
workspace page; skills and memory belong to one agent each, so `/skills` and `/memory`
lead to the only agent's page, or list the agents to choose from (none yet: the home
page, where one is created).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from opencrab.core.runtime import Runtime
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking

router = APIRouter()

AREAS = {"skills": "Skills", "memory": "Memory"}


@router.get("/agents")
async def agents() -> RedirectResponse:
    """The agents are listed on the home page."""
    return RedirectResponse("/", status_code=307)


@router.get("/workspace/{name}")
async def workspace(agent: PageAgent) -> RedirectResponse:
    """An agent's workspace (by name or id) is its workspace page."""
    return RedirectResponse(f"/agents/{quote(agent.name, safe='')}/workspace", status_code=307)


@router.get("/skills", response_class=HTMLResponse)
async def skills(request: Request) -> Response:
    """The only agent's skills, or the agents to choose from."""
    return await _choose(request, "skills")


@router.get("/memory", response_class=HTMLResponse)
async def memory(request: Request) -> Response:
    """The only agent's memory, or the agents to choose from."""
    return await _choose(request, "memory")


async def _choose(request: Request, area: Literal["skills", "memory"]) -> Response:
    runtime: Runtime = request.app.state.runtime
    found = await run_blocking(runtime.agents.list)
    if not found:
        return RedirectResponse("/", status_code=307)
    if len(found) == 1:
        return RedirectResponse(f"/agents/{quote(found[0].name, safe='')}/{area}", status_code=307)
    return render(request, "choose_agent.html", title=AREAS[area], area=area, agents=found)
