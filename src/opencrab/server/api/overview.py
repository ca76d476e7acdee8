"""Every agent at a glance (the dashboard's home cards, as JSON).

`GET /api/agent-overview` lists every agent, oldest first, with its status (idle, in a
turn, over budget), when its heartbeat ticks next, today's spend against its daily
budget and its counts of skills, sessions and curated memories;
`GET /api/agents/{id}/overview` is one agent's. Both come from
opencrab.reports.overview (over opencrab.core.overview, which the home page renders).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from opencrab.plugins import hookimpl
from opencrab.reports import overview
from opencrab.reports.overview import AgentOverviewResponse
from opencrab.server.deps import AgentId, RuntimeDep, heartbeat_scheduler
from opencrab.server.schemas import error_responses

router = APIRouter(prefix="/api", tags=["Agents"])


@router.get(
    "/agent-overview",
    operation_id="listAgentOverview",
    response_model=list[AgentOverviewResponse],
)
async def list_overview(request: Request, runtime: RuntimeDep) -> list[AgentOverviewResponse]:
    """Every agent at a glance, oldest first: status, spend and counts."""
    return await overview.agent_overviews(runtime, heartbeat_scheduler(request))


@router.get(
    "/agents/{id}/overview",
    operation_id="getAgentOverview",
    response_model=AgentOverviewResponse,
    responses=error_responses(400, 404),
)
async def get_overview(
    agent_id: AgentId, request: Request, runtime: RuntimeDep
) -> AgentOverviewResponse:
    """One agent at a glance: status, spend and counts."""
    [card] = await overview.agent_overviews(
        runtime, heartbeat_scheduler(request), agent_id=agent_id
    )
    return card


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
