"""bulk_insert writes the same rows as a plain SQLAlchemy insert, bind processing included,
on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store import tables as t
from opencrab.store.bulk import SMALL_BATCH, bulk_insert


def test_bulk_insert_matches_core_insert(any_db: Database) -> None:
    db = any_db
    when = datetime(2026, 2, 1, 12, 0, tzinfo=timezone(timedelta(hours=9)))
    columns = ("id", "name", "prompt", "created_at", "updated_at")
    rows = [(f"a{i}", f"agent {i}", "p", when, when + timedelta(seconds=i)) for i in range(3)]
    with db.write() as conn:
        bulk_insert(conn, t.agents, columns, rows)
        bulk_insert(conn, t.agents, columns, [])
    with db.read() as conn:
        got = conn.execute(
            sa.select(t.agents.c.id, t.agents.c.created_at, t.agents.c.updated_at).order_by(
                t.agents.c.id
            )
        ).all()
        raw = conn.exec_driver_sql("SELECT created_at FROM agents WHERE id = 'a0'").scalar()
    assert [r.id for r in got] == ["a0", "a1", "a2"]
    assert got[2].updated_at == when + timedelta(seconds=2)
    assert got[0].created_at.tzinfo == UTC
    if db.dialect == "sqlite":
        assert raw == "2026-02-01T03:00:00.000000Z"  # stored as fixed-width UTC text
    else:
        assert raw == when  # a TIMESTAMPTZ, the same instant


def test_a_recoverable_insert_that_fails_leaves_the_transaction_usable(any_db: Database) -> None:
    when = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)
    columns = ("id", "name", "prompt", "created_at", "updated_at")

    def agent(n: int) -> tuple[object, ...]:
        return (f"a{n}", f"agent {n}", "p", when, when)

    with any_db.write() as conn:
        bulk_insert(conn, t.agents, columns, [agent(1)], recoverable=True)
        with pytest.raises(sa.exc.IntegrityError):  # a1 again
            bulk_insert(conn, t.agents, columns, [agent(1)], recoverable=True)
        bulk_insert(conn, t.agents, columns, [agent(3)])  # the transaction goes on
    with any_db.read() as conn:
        ids = conn.execute(sa.select(t.agents.c.id).order_by(t.agents.c.id)).scalars().all()
    assert ids == ["a1", "a3"]


@pytest.mark.parametrize("count", [2, SMALL_BATCH, SMALL_BATCH + 1])
def test_small_and_large_batches_store_the_same_values(any_db: Database, count: int) -> None:
    """A few rows go to PostgreSQL as one multi-row INSERT, more as executemany: the
    stored values are the same either way (NULLs, JSON and timestamps in any row)."""
    when = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)
    columns = ("id", "name", "prompt", "llm_config_json", "created_at", "updated_at")
    rows = [
        (f"a{i:02}", f"agent {i}", "p", None if i == 0 else {"n": i}, when, when)
        for i in range(count)
    ]
    with any_db.write() as conn:
        bulk_insert(conn, t.agents, columns, rows, recoverable=True)
    with any_db.read() as conn:
        got = conn.execute(
            sa.select(t.agents.c.id, t.agents.c.llm_config_json, t.agents.c.updated_at).order_by(
                t.agents.c.id
            )
        ).all()
    assert [(r.id, r.llm_config_json, r.updated_at) for r in got] == [
        (f"a{i:02}", None if i == 0 else {"n": i}, when) for i in range(count)
    ]
