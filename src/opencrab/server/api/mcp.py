"""MCP servers over HTTP (`/api/mcp/...`): the dashboard's MCP page uses these.

`GET /api/mcp/servers` lists every server (the config file's, read-only, and those added
here) with its status in this process, its tools (input schema, annotations) and which
agents are granted them. `POST /api/mcp/servers` adds a server (a stdio `command` or an
HTTP `url`) and starts it at once; `PUT /api/mcp/servers/{name}` replaces its settings
(a secret left out keeps its stored value) and restarts it; `DELETE` stops and removes
it. Secrets (`bearerToken`, `secretHeaders`, `secretEnv`) are stored encrypted and come
back only as their last four characters. `PUT /api/mcp/servers/{name}/agents/{id}`
`{"enabled": true}` grants the agent every tool of the server (false revokes them);
`POST /api/mcp/servers/{name}/tools/{tool}/call` `{"arguments": {…}}` calls a tool as an
operator's test, with no approval asked. What they do is opencrab.reports.mcp and
opencrab.mcp.client.stored.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Request, Response
from pydantic import Field

from opencrab.mcp.client.stored import StoredMcpServers, remove_server, save_server
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import mcp as reports
from opencrab.reports.mcp import McpCallResult, McpServerView
from opencrab.server.deps import AgentId, RuntimeDep, actor_of
from opencrab.server.schemas import ApiInput, error_responses

router = APIRouter(prefix="/api/mcp", tags=["MCP"])

Name = Annotated[str, Path(max_length=40, description="The server's name.")]
ToolName = Annotated[str, Path(max_length=200, description="The tool's name on its server.")]
Text = Annotated[str, Field(max_length=4000)]


class McpServerInput(ApiInput):
    """A server's settings: `command` (stdio) or `url` (streamable HTTP), not both."""

    command: Text = ""
    args: list[Text] = Field(default_factory=list, max_length=100)
    env: dict[str, Text] = Field(default_factory=dict)
    read_paths: list[Text] = Field(default_factory=list, max_length=100)
    network: bool = False
    url: Text = ""
    headers: dict[str, Text] = Field(default_factory=dict)
    allow_private: bool = False
    call_timeout_secs: float = Field(default=60.0, gt=0, le=3600)
    start_timeout_secs: float = Field(default=30.0, gt=0, le=600)
    bearer_token: Text | None = Field(
        default=None, description='Sent as a bearer token; left out: kept; "": removed.'
    )
    secret_headers: dict[str, Text] = Field(
        default_factory=dict, description='Headers stored encrypted; "" keeps a stored value.'
    )
    secret_env: dict[str, Text] = Field(
        default_factory=dict, description='Variables stored encrypted; "" keeps a stored value.'
    )


class McpServerCreate(McpServerInput):
    name: str = Field(min_length=1, max_length=40)


class McpGrant(ApiInput):
    enabled: bool


class McpCall(ApiInput):
    arguments: dict[str, Any] = Field(default_factory=dict)


def _stored(request: Request) -> StoredMcpServers | None:
    found: StoredMcpServers | None = getattr(request.app.state, "mcp", None)
    return found


def _body(body: McpServerInput) -> dict[str, Any]:
    return body.model_dump(exclude={"name"})


@router.get("/servers", operation_id="listMcpServers", response_model=list[McpServerView])
async def list_servers(request: Request, runtime: RuntimeDep) -> list[McpServerView]:
    """Every MCP server with its status, tools and grants."""
    return await run_blocking(reports.servers_view, runtime, _stored(request))


@router.get(
    "/servers/{name}",
    operation_id="getMcpServer",
    response_model=McpServerView,
    responses=error_responses(404),
)
async def get_server(name: Name, request: Request, runtime: RuntimeDep) -> McpServerView:
    """One MCP server with its status, tools and grants."""
    return await run_blocking(reports.server_view, runtime, _stored(request), name)


@router.post(
    "/servers",
    operation_id="createMcpServer",
    status_code=201,
    response_model=McpServerView,
    responses=error_responses(400, 409),
)
async def create_server(
    body: McpServerCreate, request: Request, runtime: RuntimeDep
) -> McpServerView:
    """Add a server and start it (its status says whether it came up)."""
    await run_blocking(
        save_server, runtime, body.name, _body(body), actor=actor_of(request), create=True
    )
    return await _synced(request, runtime, body.name)


@router.put(
    "/servers/{name}",
    operation_id="updateMcpServer",
    response_model=McpServerView,
    responses=error_responses(400, 404, 409),
)
async def update_server(
    name: Name, body: McpServerInput, request: Request, runtime: RuntimeDep
) -> McpServerView:
    """Replace a dashboard server's settings and restart it."""
    actor = actor_of(request)
    await run_blocking(save_server, runtime, name, _body(body), actor=actor, create=False)
    return await _synced(request, runtime, name)


@router.delete(
    "/servers/{name}",
    operation_id="deleteMcpServer",
    status_code=204,
    responses=error_responses(404, 409),
)
async def delete_server(name: Name, request: Request, runtime: RuntimeDep) -> Response:
    """Stop and remove a dashboard server (its tools' grants stay, unused)."""
    await run_blocking(remove_server, runtime, name, actor=actor_of(request))
    stored = _stored(request)
    if stored is not None:
        await stored.sync()
    return Response(status_code=204)


@router.put(
    "/servers/{name}/agents/{id}",
    operation_id="setMcpServerGrant",
    response_model=McpServerView,
    responses=error_responses(400, 404),
)
async def set_grant(
    name: Name, agent: AgentId, body: McpGrant, request: Request, runtime: RuntimeDep
) -> McpServerView:
    """Grant the agent every tool the server offers (`enabled`), or revoke them all."""
    return await run_blocking(
        reports.set_server_grant, runtime, _stored(request), name, agent, body.enabled
    )


@router.post(
    "/servers/{name}/tools/{tool}/call",
    operation_id="callMcpTool",
    response_model=McpCallResult,
    responses=error_responses(400, 404),
)
async def call_tool(
    name: Name, tool: ToolName, body: McpCall, request: Request, runtime: RuntimeDep
) -> McpCallResult:
    """Call the tool as an operator's test: arguments checked against its schema, no
    approval asked; the result as an agent would get it."""
    return await reports.call_tool(
        runtime, _stored(request), name, tool, body.arguments, actor=actor_of(request)
    )


async def _synced(request: Request, runtime: Any, name: str) -> McpServerView:
    stored = _stored(request)
    if stored is not None:
        await stored.sync()
    return await run_blocking(reports.server_view, runtime, stored, name)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
