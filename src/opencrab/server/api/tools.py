"""Tools (seed 002 `/api/tools`): every action an agent can be granted, as a tool.

Only the tools offered now are listed: one whose tool source dropped it keeps its row (and
its grants, core/tools.py) but is not found here until the source offers it again.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI

from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import tools
from opencrab.reports.tools import ToolResponse
from opencrab.server.deps import RuntimeDep, record_id
from opencrab.server.schemas import error_responses

router = APIRouter(prefix="/api", tags=["Tools"])


@router.get("/tools", operation_id="listTools", response_model=list[ToolResponse])
async def list_tools(runtime: RuntimeDep) -> list[ToolResponse]:
    """Every tool offered now, by name."""
    return await run_blocking(tools.tool_list, runtime.db, runtime.registry)


@router.get(
    "/tools/{id}",
    operation_id="getTool",
    response_model=ToolResponse,
    responses=error_responses(404),
)
async def get_tool(
    tool_id: Annotated[UUID, Depends(record_id("tool"))], runtime: RuntimeDep
) -> ToolResponse:
    """One tool offered now, with its JSON Schema."""
    return await run_blocking(tools.tool_view, runtime.db, runtime.registry, str(tool_id))


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
