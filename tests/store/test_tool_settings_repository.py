"""The agent_tool_settings repository on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.repositories import tool_settings
from opencrab.store.tables import agents


def _agent(db: Database) -> str:
    agent_id = str(uuid4())
    now = datetime.now(UTC)
    with db.write() as conn:
        conn.execute(
            agents.insert().values(
                id=agent_id, name=f"a-{agent_id[:8]}", prompt="p", created_at=now, updated_at=now
            )
        )
    return agent_id


def test_settings_are_saved_replaced_and_go_with_the_agent(any_db: Database) -> None:
    agent_id = _agent(any_db)
    assert tool_settings.load(any_db, agent_id) == {}
    tool_settings.save(any_db, agent_id, {"execute_command": True})
    tool_settings.save(any_db, agent_id, {"http_request": True})
    assert tool_settings.load(any_db, agent_id) == {"http_request": True}
    with any_db.write() as conn:
        conn.execute(agents.delete().where(agents.c.id == agent_id))
    assert tool_settings.load(any_db, agent_id) == {}


def test_settings_need_an_agent(any_db: Database) -> None:
    with pytest.raises(sa.exc.IntegrityError):
        tool_settings.save(any_db, str(uuid4()), {"execute_command": True})
