"""Database: a read transaction sees one snapshot, on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store import tables as t
from opencrab.store.types import utcnow


def _count(conn: sa.Connection) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(t.agents)).scalar_one())


def test_a_read_does_not_see_writes_committed_after_it_began(any_db: Database) -> None:
    db = any_db
    now = utcnow()
    with db.read() as conn:
        assert _count(conn) == 0
        with db.write() as writer:  # another connection, committed on exit
            writer.execute(
                t.agents.insert(),
                {"id": "a1", "name": "Ada", "prompt": "", "created_at": now, "updated_at": now},
            )
        assert _count(conn) == 0  # the same snapshot throughout
    with db.read() as conn:
        assert _count(conn) == 1
