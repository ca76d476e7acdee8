"""bulk_insert writes the same rows as a plain SQLAlchemy insert, bind processing included,
on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store import tables as t
from opencrab.store.bulk import SMALL_BATCH, bulk_insert
from opencrab.store.types import format_timestamp


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


def test_columns_given_in_another_order_than_the_tables_go_to_their_columns(
    any_db: Database,
) -> None:
    """The INSERT lists the columns in the caller's order (on SQLite its own SQL): each
    value lands in the column it was given for."""
    when = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)
    columns = ("updated_at", "prompt", "name", "created_at", "id")  # the table's reversed
    rows = [(when + timedelta(seconds=i), f"p{i}", f"agent {i}", when, f"a{i}") for i in range(3)]
    with any_db.write() as conn:
        bulk_insert(conn, t.agents, columns, rows)
    with any_db.read() as conn:
        got = conn.execute(
            sa.select(*(t.agents.c[name] for name in columns)).order_by(t.agents.c.id)
        ).all()
    assert [tuple(r) for r in got] == rows


def test_bound_rows_are_stored_as_the_driver_takes_them(any_db: Database) -> None:
    """`bound=True`: the caller did the bind processing (a UtcDateTime as storage text on
    SQLite, an aware datetime on PostgreSQL); the rows read back as with processing."""
    when = datetime(2026, 2, 1, 3, 0, 0, 123000, tzinfo=UTC)
    bound = format_timestamp(when) if any_db.dialect == "sqlite" else when
    columns = ("id", "name", "prompt", "created_at", "updated_at")
    with any_db.write() as conn:
        bulk_insert(conn, t.agents, columns, [("b1", "bound", "p", bound, bound)], bound=True)
        bulk_insert(conn, t.agents, columns, [("p1", "processed", "p", when, when)])
    with any_db.read() as conn:
        got = conn.execute(
            sa.select(t.agents.c.id, t.agents.c.created_at).order_by(t.agents.c.id)
        ).all()
        raw = conn.exec_driver_sql("SELECT created_at FROM agents ORDER BY id").scalars().all()
    assert [(r.id, r.created_at) for r in got] == [("b1", when), ("p1", when)]
    assert raw[0] == raw[1]  # stored exactly as bind processing would store it
