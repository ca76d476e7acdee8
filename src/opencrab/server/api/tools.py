"""Tools (seed 002 `/api/tools`): every action an agent can be granted, as a tool."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI

from opencrab.plugins import hookimpl
from opencrab.reports import tools
from opencrab.reports.tools import ToolResponse
from opencrab.server.deps import DatabaseDep, record_id
from opencrab.server.schemas import error_responses

router = APIRouter(prefix="/api", tags=["Tools"])


@router.get("/tools", operation_id="listTools", response_model=list[ToolResponse])
def list_tools(db: DatabaseDep) -> list[ToolResponse]:
    """Every tool, by name."""
    return tools.tool_list(db)


@router.get(
    "/tools/{id}",
    operation_id="getTool",
    response_model=ToolResponse,
    responses=error_responses(404),
)
def get_tool(tool_id: Annotated[UUID, Depends(record_id("tool"))], db: DatabaseDep) -> ToolResponse:
    """One tool with its JSON Schema."""
    return tools.tool_view(db, str(tool_id))


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
