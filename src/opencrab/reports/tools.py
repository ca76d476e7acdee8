"""Tools (seed 002 `/api/tools`) as the API lists and shows them: every action an agent
can be granted, with its JSON Schema, from the `tools` table (core/tools.py keeps it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from opencrab.errors import NotFoundError
from opencrab.reports.model import ApiModel
from opencrab.store import Database
from opencrab.store.repositories import tools as repo
from opencrab.store.repositories.tools import ToolRow


class ToolResponse(ApiModel):
    id: UUID
    name: str
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", description="JSON Schema of the input.")
    created_at: datetime


def _tool(row: ToolRow) -> ToolResponse:
    return ToolResponse.model_validate(row, from_attributes=True)


def tool_list(db: Database) -> list[ToolResponse]:
    """Every tool, by name."""
    with db.read() as conn:
        rows = repo.all_tools(conn)
    return [_tool(r) for r in rows]


def tool_view(db: Database, tool_id: str) -> ToolResponse:
    """One tool with its JSON Schema (NotFoundError when there is none)."""
    with db.read() as conn:
        row = repo.tool_by_id(conn, tool_id)
    if row is None:
        raise NotFoundError(f"no tool {tool_id}")
    return _tool(row)
