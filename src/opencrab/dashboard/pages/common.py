"""What the pages of one agent share: finding the agent, and its overview redirect."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import RedirectResponse

from opencrab.core.agent import MAX_NAME, Agent
from opencrab.offload import run_blocking

router = APIRouter()

AgentRef = Annotated[str, Path(min_length=1, max_length=MAX_NAME)]


async def page_agent(name: AgentRef, request: Request) -> Agent:
    """The agent a page's path names (by name or id); a missing one is the 404 page."""
    agents = request.app.state.runtime.agents
    agent: Agent = await run_blocking(agents.get, name)
    return agent


PageAgent = Annotated[Agent, Depends(page_agent)]
"""For `/agents/{name}/...` routes: `async def page(agent: PageAgent, request: Request)`."""


@router.get("/agents/{name}")
async def agent_home(agent: PageAgent) -> RedirectResponse:
    """An agent's own address leads to its persona."""
    return RedirectResponse(f"/agents/{quote(agent.name, safe='')}/persona", status_code=307)
