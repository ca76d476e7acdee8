"""The `tools` rows (one per registered action) and `agent_tools`, an agent's grants.

Every function runs inside the caller's transaction and returns typed values.

Example:
    with db.write() as conn:
        insert_tool(conn, ToolRow(id=..., name="ws_read", description="…", schema={}, ...))
        replace_grants(conn, agent_id, [tool_id])
    with db.read() as conn:
        granted_tool_names(conn, agent_id)      # {"ws_read"}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.dialects import upsert
from opencrab.store.prepared import Prepared
from opencrab.store.tables import agent_tools, tools


@dataclass(frozen=True)
class ToolRow:
    """One `tools` row: an action's name, description and JSON Schema."""

    id: str
    name: str
    description: str | None
    schema: dict[str, Any]
    created_at: datetime


def _tool(row: Any) -> ToolRow:
    return ToolRow(
        id=str(row.id),
        name=row.name,
        description=row.description,
        schema=row.schema,
        created_at=row.created_at,
    )


# ------------------------------------------------------------------ tools
def all_tools(conn: Connection) -> list[ToolRow]:
    """Every tool, by name."""
    return [_tool(r) for r in conn.execute(sa.select(tools).order_by(tools.c.name))]


def tool_by_id(conn: Connection, tool_id: str) -> ToolRow | None:
    """The tool with this id, None when there is none."""
    row = conn.execute(sa.select(tools).where(tools.c.id == str(tool_id))).first()
    return None if row is None else _tool(row)


def tool_texts(conn: Connection) -> dict[str, tuple[str | None, Any]]:
    """(description, schema) of every stored tool by name: one query."""
    rows = conn.execute(sa.select(tools.c.name, tools.c.description, tools.c.schema))
    return {row.name: (row.description, row.schema) for row in rows}


def insert_tool(conn: Connection, row: ToolRow) -> None:
    """Store a new tool row; one another process stored meanwhile (two servers starting
    on one PostgreSQL at once) is refreshed instead."""
    conn.execute(
        upsert(
            conn.dialect,
            tools,
            ["id"],
            id=row.id,
            name=row.name,
            description=row.description,
            schema=row.schema,
            created_at=row.created_at,
        )
    )


def update_tool(conn: Connection, name: str, description: str | None, schema: Any) -> None:
    """Refresh the description and schema of the tool with this name."""
    conn.execute(
        tools.update().where(tools.c.name == name).values(description=description, schema=schema)
    )


def tool_names(conn: Connection, ids: Sequence[str]) -> dict[str, str]:
    """id -> name for the given tool ids that exist."""
    rows = conn.execute(sa.select(tools.c.id, tools.c.name).where(tools.c.id.in_(list(ids))))
    return {str(row.id): row.name for row in rows}


def known_tool_ids(conn: Connection, ids: Sequence[str]) -> set[str]:
    """Which of these ids are stored tools."""
    found = conn.execute(sa.select(tools.c.id).where(tools.c.id.in_(list(ids)))).scalars()
    return {str(t) for t in found}


# ------------------------------------------------------------------ grants
def granted_tool_names(conn: Connection, agent_id: str) -> set[str]:
    """Names of the tools granted to the agent: one prepared read."""
    return {row.name for row in _GRANTED.rows(conn, agent_id=agent_id)}


def queue_granted_tool_names(conn: Connection, agent_id: str) -> None:
    """Send `granted_tool_names`' read ahead (Prepared.queue: one round trip with others)."""
    _GRANTED.queue(conn, agent_id=agent_id)


def granted_tool_ids(conn: Connection, agent_id: str) -> list[str]:
    """Ids of the tools granted to the agent (one prepared read)."""
    return [str(row.tool_id) for row in _GRANTED_IDS.rows(conn, agent_id=agent_id)]


def queue_granted_tool_ids(conn: Connection, agent_id: str) -> None:
    """Send `granted_tool_ids`' read ahead (Prepared.queue: one round trip with others)."""
    _GRANTED_IDS.queue(conn, agent_id=agent_id)


_GRANTED_IDS = Prepared(
    sa.select(agent_tools.c.tool_id).where(agent_tools.c.agent_id == sa.bindparam("agent_id"))
)


def all_grants(conn: Connection) -> dict[str, list[str]]:
    """Every agent's granted tool ids, by agent id: one query."""
    grants: dict[str, list[str]] = {}
    for agent_id, tool in conn.execute(sa.select(agent_tools.c.agent_id, agent_tools.c.tool_id)):
        grants.setdefault(str(agent_id), []).append(str(tool))
    return grants


def replace_grants(conn: Connection, agent_id: str, tool_ids: Iterable[str]) -> None:
    """Grant the agent exactly these (existing) tools."""
    conn.execute(agent_tools.delete().where(agent_tools.c.agent_id == agent_id))
    wanted = list(tool_ids)
    if wanted:
        conn.execute(agent_tools.insert(), [{"agent_id": agent_id, "tool_id": t} for t in wanted])


_GRANTED = Prepared(
    sa.select(tools.c.name)
    .join(agent_tools, agent_tools.c.tool_id == tools.c.id)
    .where(agent_tools.c.agent_id == sa.bindparam("agent_id"))
)
