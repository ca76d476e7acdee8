"""Agent tool settings (`agent_tool_settings`): the one writer of that table.

A row holds an agent's switches for the seed tools that reach outside its workspace, as
the JSON object opencrab.actions.tool_settings.ToolSettings validates; an agent without a
row has none switched on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.database import Database
from opencrab.store.prepared import Prepared
from opencrab.store.tables import agent_tool_settings

_ROW = Prepared(
    sa.select(agent_tool_settings.c.settings_json).where(
        agent_tool_settings.c.agent_id == sa.bindparam("agent_id")
    )
)


def load(db: Database, agent_id: str) -> dict[str, Any]:
    """The agent's stored settings object ({} when it has none)."""
    with db.read() as conn:
        rows = _ROW.rows(conn, agent_id=str(agent_id))
    if not rows or not isinstance(rows[0][0], dict):
        return {}
    return dict(rows[0][0])


def queue_load(conn: Connection, agent_id: str) -> None:
    """Send `load`'s read ahead (Prepared.queue: one round trip with others)."""
    _ROW.queue(conn, agent_id=str(agent_id))


def save(db: Database, agent_id: str, settings: dict[str, Any]) -> None:
    """Replace the agent's settings object (the agent must exist: a foreign key)."""
    now = datetime.now(UTC)
    key = agent_tool_settings.c.agent_id == str(agent_id)
    with db.write() as conn:
        done = conn.execute(
            agent_tool_settings.update().where(key).values(settings_json=settings, updated_at=now)
        )
        if done.rowcount == 0:
            conn.execute(
                agent_tool_settings.insert().values(
                    agent_id=str(agent_id), settings_json=settings, updated_at=now
                )
            )
