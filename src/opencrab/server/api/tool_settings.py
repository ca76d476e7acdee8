"""An agent's tool settings (`/api/agents/{id}/tool-settings`): the gated seed tools.

execute_command, http_request and fetch_webpage do nothing for an agent until switched on
here, e.g. `PUT /api/agents/aki/tool-settings {"executeCommand": true}`; the PUT
replaces the settings (a switch left out is off). Granting the tool (`toolIds`) is still
needed for the model to be offered it.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool

from opencrab.actions.tool_settings import ToolSettings, load_tool_settings, save_tool_settings
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep, DatabaseDep
from opencrab.server.schemas import error_responses

router = APIRouter(prefix="/api", tags=["Agents"])


@router.get(
    "/agents/{id}/tool-settings",
    operation_id="getToolSettings",
    response_model=ToolSettings,
    responses=error_responses(400, 404),
)
async def get_tool_settings(agent: AgentDep, db: DatabaseDep) -> ToolSettings:
    """Which of execute_command, http_request and fetch_webpage the agent may use."""
    return await run_in_threadpool(load_tool_settings, db, agent.id)


@router.put(
    "/agents/{id}/tool-settings",
    operation_id="updateToolSettings",
    response_model=ToolSettings,
    responses=error_responses(400, 404),
)
async def update_tool_settings(
    agent: AgentDep, body: ToolSettings, db: DatabaseDep
) -> ToolSettings:
    """Replace the switches (one left out is off); the next tool call follows them."""
    await run_in_threadpool(save_tool_settings, db, agent.id, body)
    return await run_in_threadpool(load_tool_settings, db, agent.id)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
