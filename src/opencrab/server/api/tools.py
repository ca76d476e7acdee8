"""Tools (seed 002 `/api/tools`): every action an agent can be granted, as a tool.

Only the tools offered now are listed: one whose tool source dropped it keeps its row (and
its grants, core/tools.py) but is not found here until the source offers it again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI
from pydantic import Field

from opencrab.core.runtime import Runtime
from opencrab.core.tools import offered_tools
from opencrab.errors import NotFoundError
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.server.deps import RuntimeDep, record_id
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
async def list_tools(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Every tool offered now, by name."""
    rows = await run_blocking(offered_tools, runtime.db, runtime.registry)
    return [_tool(r) for r in rows]


@router.get(
    "/tools/{id}",
    operation_id="getTool",
    response_model=ToolResponse,
    responses=error_responses(404),
)
async def get_tool(
    tool_id: Annotated[UUID, Depends(record_id("tool"))], runtime: RuntimeDep
) -> dict[str, Any]:
    """One tool offered now, with its JSON Schema."""
    row = await run_blocking(_stored, runtime, str(tool_id))
    if row is None:
        raise NotFoundError(f"no tool {tool_id}")
    if row.name not in runtime.registry:
        raise NotFoundError(
            f"tool {row.name} ({tool_id}) is not offered now: its source does not list it"
        )
    return _tool(row)


def _stored(runtime: Runtime, tool_id: str) -> ToolRow | None:
    with runtime.db.read() as conn:
        return repo.tool_by_id(conn, tool_id)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
