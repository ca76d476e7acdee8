"""The `tools` rows mirror the action registry, also when several processes start at once
on one PostgreSQL (each stores the rows it did not find)."""

from __future__ import annotations

import threading

import sqlalchemy as sa

from opencrab.actions.base import default_registry
from opencrab.core.tools import sync_tools, tool_id
from opencrab.store import Database
from opencrab.store.tables import tools


def test_two_processes_storing_the_tools_at_once_both_start(pg_url: str) -> None:
    """The second server found no rows, the first stored them meanwhile: its insert met
    the first's rows (a unique violation stopped it at startup; it now refreshes them)."""
    db, other = Database(pg_url), Database(pg_url)  # two engines, as two processes have
    db.upgrade()
    registry = default_registry()
    failed: list[BaseException] = []
    try:
        with other.engine.connect() as first:  # the first process, mid-startup
            for definition in registry.definitions():
                first.execute(
                    tools.insert().values(
                        id=tool_id(definition.name),
                        name=definition.name,
                        description="stored by the first",
                        schema={},
                        created_at=sa.func.now(),
                    )
                )

            def second() -> None:
                try:
                    sync_tools(db, registry)  # reads no rows; its inserts wait for the first
                except BaseException as exc:
                    failed.append(exc)

            thread = threading.Thread(target=second)
            thread.start()
            thread.join(1.0)  # waiting on the first's uncommitted rows
            first.commit()
            thread.join(30)
        assert failed == []
        with db.read() as conn:
            stored = {r.name: r.description for r in conn.execute(sa.select(tools))}
        assert stored == {d.name: d.description for d in registry.definitions()}
    finally:
        db.close()
        other.close()
