"""The `tools` table mirrors the action registry.

See docs/architecture.md, "One model for every specification".

Every registered action has one row (name, description, JSON Schema) with a stable id,
so seed 002's `toolIds` can grant an agent actions beyond its skills. The rows are read
and written through store/repositories/tools.py.

A row is never deleted: a tool source's tool that vanishes (core/tool_sources.py) keeps
its row and every grant of it, and comes back under the same id. What is offered now is
the registry's to say: `offered_tools` lists only those rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from uuid import NAMESPACE_URL, uuid5

from opencrab.actions.base import ActionRegistry
from opencrab.store import Database
from opencrab.store.repositories import tools as repo
from opencrab.store.repositories.tools import ToolRow


def tool_id(name: str) -> str:
    """The stable id of the tool row for an action name."""
    return str(uuid5(NAMESPACE_URL, f"opencrab:action:{name}"))


def sync_tools(db: Database, registry: ActionRegistry) -> None:
    """Insert or refresh one `tools` row per registered action."""
    now = datetime.now(UTC)
    with db.write() as conn:
        stored = repo.tool_texts(conn)
        for definition in registry.definitions():
            text = (definition.description, definition.parameters)
            found = stored.get(definition.name)
            if found is None:
                repo.insert_tool(
                    conn,
                    ToolRow(
                        id=tool_id(definition.name),
                        name=definition.name,
                        description=definition.description,
                        schema=definition.parameters,
                        created_at=now,
                    ),
                )
            elif found != text:
                repo.update_tool(conn, definition.name, *text)


def offered_tools(db: Database, registry: ActionRegistry) -> list[ToolRow]:
    """The rows of the tools the registry offers now, by name."""
    with db.read() as conn:
        rows = repo.all_tools(conn)
    return [row for row in rows if row.name in registry]


def granted_tool_names(db: Database, agent_id: str) -> set[str]:
    """Names of the tools granted to the agent through `agent_tools`."""
    with db.read() as conn:
        return repo.granted_tool_names(conn, agent_id)


def tool_names(db: Database, ids: Iterable[str]) -> dict[str, str]:
    """id -> name for the given tool ids that exist."""
    wanted = [str(i) for i in ids]
    if not wanted:
        return {}
    with db.read() as conn:
        return repo.tool_names(conn, wanted)
