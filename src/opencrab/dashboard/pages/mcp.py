"""The MCP page (`/settings/mcp`; `/mcp` itself is OpenCrab's own MCP endpoint): the MCP
servers whose tools agents use, as `GET /api/mcp/servers` shows them (the same
function, opencrab.reports.mcp), with their status, tools (schemas, annotations), which
agents are granted them and a form to call a tool. Every change goes through the REST
API (`POST/PUT/DELETE /api/mcp/servers…`, `PUT …/agents/{id}`, `POST …/tools/{tool}/call`),
sent by `static/js/mcp.js`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.reports.mcp import servers_view

router = APIRouter()


@router.get("/settings/mcp", response_class=HTMLResponse)
async def mcp_page(request: Request) -> HTMLResponse:
    """The MCP servers, their status, tools and grants; add, edit, remove, call a tool."""
    runtime: Runtime = request.app.state.runtime
    servers = await run_blocking(servers_view, runtime, getattr(request.app.state, "mcp", None))
    return render(request, "mcp.html", title="MCP servers", servers=servers)
