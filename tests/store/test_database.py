"""Database: a read transaction sees one snapshot, on SQLite and on PostgreSQL."""

from __future__ import annotations

import time

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


def test_reads_see_one_snapshot_and_writes_commit_read_committed(any_db: Database) -> None:
    if any_db.dialect != "postgresql":
        return  # SQLite: a read under WAL is one snapshot by itself (the test above)
    for _ in range(2):  # the same pooled connection, switching back and forth
        with any_db.read() as conn:
            level = conn.exec_driver_sql("SHOW transaction_isolation").scalar_one()
            assert level == "repeatable read"
        with any_db.write() as conn:
            level = conn.exec_driver_sql("SHOW transaction_isolation").scalar_one()
            assert level == "read committed"


def test_a_pooled_connection_the_server_dropped_is_replaced_unseen(pg_url: str) -> None:
    db = Database(pg_url)
    admin = Database(pg_url)
    try:
        with db.read() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with admin.write() as conn:  # the server ends it while it sits in the pool
            assert conn.exec_driver_sql("SELECT pg_terminate_backend(%s)", (pid,)).scalar_one()
        for _ in range(200):  # terminating is asynchronous: wait till the backend is gone
            with admin.read() as conn:
                alive = conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).scalar_one()
            if not alive:
                break
            time.sleep(0.01)
        with db.read() as conn:  # no error: the pool hands out a live connection
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() != pid
        with db.write() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
    finally:
        db.close()
        admin.close()
