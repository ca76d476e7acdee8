"""Tools (seed 002 `/api/tools`) as the API lists and shows them: every action an agent
can be granted, with its JSON Schema, from the `tools` table (core/tools.py keeps it),
less those a tool source does not list now."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from opencrab.actions.base import ActionRegistry
from opencrab.core.tools import offered_tools
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


def tool_list(db: Database, registry: ActionRegistry) -> list[ToolResponse]:
    """Every tool offered now (a tool source's tools while it lists them), by name."""
    return [_tool(r) for r in offered_tools(db, registry)]


def tool_view(db: Database, registry: ActionRegistry, tool_id: str) -> ToolResponse:
    """One tool offered now, with its JSON Schema (NotFoundError when there is none, or
    when its tool source does not list it now)."""
    with db.read() as conn:
        row = repo.tool_by_id(conn, tool_id)
    if row is None:
        raise NotFoundError(f"no tool {tool_id}")
    if row.name not in registry:
        raise NotFoundError(
            f"tool {row.name} ({tool_id}) is not offered now: its source does not list it"
        )
    return _tool(row)
