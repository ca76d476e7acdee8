"""An agent's tools by name (`/api/agents/{id}/tools`): grant, switch, approval policy.

`GET /api/agents/{id}/tools` lists every tool with what the agent has of it;
`PUT /api/agents/{id}/tools/{name}` with `{"granted": true, "enabled": true,
"approval": "always"}` grants it, switches it on (execute_command, http_request,
fetch_webpage only) and makes its calls wait for a person; a field left out is kept.
The same settings stay available as seed 002 declares them (`toolIds` of the agent,
`/api/agents/{id}/tool-settings`). An unknown tool name is a 404 naming it. A granted
tool its source does not offer now is listed with `"offered": false`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Path
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from opencrab.actions.tool_settings import ApprovalPolicy
from opencrab.core.agent_tools import AgentTool, agent_tools, set_agent_tool
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep, RuntimeDep
from opencrab.server.schemas import ApiInput, ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Agents"])

ToolName = Annotated[str, Path(alias="name", max_length=100, description="The tool's name.")]


class AgentToolResponse(ApiModel):
    name: str
    tool_id: str
    description: str | None = None
    granted: bool = Field(description="The model is offered the tool (seed 002 toolIds).")
    enabled: bool | None = Field(
        default=None,
        description="execute_command, http_request, fetch_webpage: switched on; else null.",
    )
    approval: ApprovalPolicy = Field(
        description="never, always, or unsafe (calls that may "
        "change something outside the store) wait for a person."
    )
    offered: bool = Field(
        default=True,
        description="false: its tool source does not offer it now; the grant stays, "
        "and it cannot be called until the source offers it again.",
    )


class AgentToolChange(ApiInput):
    granted: bool | None = None
    enabled: bool | None = None
    approval: ApprovalPolicy | None = None


def _response(tool: AgentTool) -> AgentToolResponse:
    return AgentToolResponse(
        name=tool.name,
        tool_id=tool.tool_id,
        description=tool.description,
        granted=tool.granted,
        enabled=tool.enabled,
        approval=tool.approval,
        offered=tool.offered,
    )


@router.get(
    "/agents/{id}/tools",
    operation_id="listAgentTools",
    response_model=list[AgentToolResponse],
    responses=error_responses(400, 404),
)
async def list_agent_tools(agent: AgentDep, runtime: RuntimeDep) -> list[AgentToolResponse]:
    """Every tool by name, with the agent's grant, switch and approval policy."""
    found = await run_in_threadpool(agent_tools, runtime.db, runtime.registry, agent)
    return [_response(t) for t in found]


@router.put(
    "/agents/{id}/tools/{name}",
    operation_id="setAgentTool",
    response_model=AgentToolResponse,
    responses=error_responses(400, 404),
)
async def set_tool(
    agent: AgentDep, name: ToolName, body: AgentToolChange, runtime: RuntimeDep
) -> AgentToolResponse:
    """Grant or revoke the tool, switch it, set its approval policy (left out: kept)."""
    tool = await run_in_threadpool(
        set_agent_tool,
        runtime.db,
        runtime.agents,
        runtime.registry,
        agent,
        name,
        granted=body.granted,
        enabled=body.enabled,
        approval=body.approval,
    )
    return _response(tool)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
