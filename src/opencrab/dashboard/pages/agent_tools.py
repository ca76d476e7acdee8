"""An agent's Tools tab (`/agents/{name}/tools`): grant each tool, switch it, hold its calls.

One row per tool: granted (the model is offered it), the switch of execute_command,
http_request and fetch_webpage, and the approval policy (never, always, unsafe); a granted
tool its source does not offer now is marked so. Each row saves through
`PUT /api/agents/{id}/tools/{name}` (server/api/agent_tools.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent_tools import agent_tools
from opencrab.core.runtime import Runtime
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking

router = APIRouter()

POLICIES = ["never", "unsafe", "always"]


@router.get("/agents/{name}/tools", response_class=HTMLResponse)
async def agent_tools_page(agent: PageAgent, request: Request) -> HTMLResponse:
    """The agent's tools with their grant, switch and approval policy."""
    runtime: Runtime = request.app.state.runtime
    tools = await run_blocking(agent_tools, runtime.db, runtime.registry, agent)
    return render(
        request,
        "agent_tools.html",
        title=f"Tools · {agent.name}",
        agent=agent,
        tab="tools",
        tools=tools,
        policies=POLICIES,
    )
