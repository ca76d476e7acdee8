"""Tools (seed 002 `/api/tools`): every action an agent can be granted, as a tool."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI
from pydantic import Field

from opencrab.errors import NotFoundError
from opencrab.plugins import hookimpl
from opencrab.server.deps import DatabaseDep, record_id
from opencrab.server.schemas import ApiModel, error_responses
from opencrab.store.repositories import tools as repo
from opencrab.store.repositories.tools import ToolRow

router = APIRouter(prefix="/api", tags=["Tools"])


class ToolResponse(ApiModel):
    id: UUID
    name: str
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", description="JSON Schema of the input.")
    created_at: datetime


def _tool(row: ToolRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "description": row.description,
        "schema": row.schema,
        "createdAt": row.created_at,
    }


@router.get("/tools", operation_id="listTools", response_model=list[ToolResponse])
def list_tools(db: DatabaseDep) -> list[dict[str, Any]]:
    """Every tool, by name."""
    with db.read() as conn:
        rows = repo.all_tools(conn)
    return [_tool(r) for r in rows]


@router.get(
    "/tools/{id}",
    operation_id="getTool",
    response_model=ToolResponse,
    responses=error_responses(404),
)
def get_tool(
    tool_id: Annotated[UUID, Depends(record_id("tool"))], db: DatabaseDep
) -> dict[str, Any]:
    """One tool with its JSON Schema."""
    with db.read() as conn:
        row = repo.tool_by_id(conn, str(tool_id))
    if row is None:
        raise NotFoundError(f"no tool {tool_id}")
    return _tool(row)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
