"""The `tools` table mirrors the action registry (DESIGN.md "Tools are actions").

Every registered action has one row (name, description, JSON Schema) with a stable id,
so seed 002's `toolIds` can grant an agent actions beyond its skills.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from uuid import NAMESPACE_URL, uuid5

import sqlalchemy as sa

from opencrab.actions.base import ActionRegistry
from opencrab.store import Database
from opencrab.store.prepared import Prepared
from opencrab.store.tables import agent_tools, tools


def tool_id(name: str) -> str:
    """The stable id of the tool row for an action name."""
    return str(uuid5(NAMESPACE_URL, f"opencrab:action:{name}"))


def sync_tools(db: Database, registry: ActionRegistry) -> None:
    """Insert or refresh one `tools` row per registered action."""
    now = datetime.now(UTC)
    with db.write() as conn:
        stored = {
            row.name: row
            for row in conn.execute(sa.select(tools.c.name, tools.c.description, tools.c.schema))
        }
        for definition in registry.definitions():
            row = stored.get(definition.name)
            values = {"description": definition.description, "schema": definition.parameters}
            if row is None:
                conn.execute(
                    tools.insert().values(
                        id=tool_id(definition.name), name=definition.name, created_at=now, **values
                    )
                )
            elif (row.description, row.schema) != (definition.description, definition.parameters):
                conn.execute(tools.update().where(tools.c.name == definition.name).values(values))


def granted_tool_names(db: Database, agent_id: str) -> set[str]:
    """Names of the tools granted to the agent through `agent_tools`."""
    with db.read() as conn:
        return {row.name for row in _GRANTED.rows(conn, agent_id=agent_id)}


_GRANTED = Prepared(
    sa.select(tools.c.name)
    .join(agent_tools, agent_tools.c.tool_id == tools.c.id)
    .where(agent_tools.c.agent_id == sa.bindparam("agent_id"))
)


def tool_names(db: Database, ids: Iterable[str]) -> dict[str, str]:
    """id -> name for the given tool ids that exist."""
    wanted = [str(i) for i in ids]
    if not wanted:
        return {}
    with db.read() as conn:
        rows = conn.execute(sa.select(tools.c.id, tools.c.name).where(tools.c.id.in_(wanted)))
        return {str(row.id): row.name for row in rows}
