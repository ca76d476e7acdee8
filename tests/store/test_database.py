"""Database: a read transaction sees one snapshot, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
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


def _backend_alive(admin: Database, pid: int) -> bool:
    with admin.read() as conn:
        found = conn.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).scalar_one()
    return bool(found)


def test_a_connection_the_server_drops_mid_transaction_is_not_kept(pg_url: str) -> None:
    db = Database(pg_url)
    admin = Database(pg_url)
    try:
        with db.write() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()

        def killed_mid_write() -> None:
            with db.write() as conn:
                with admin.write() as killer:
                    killer.exec_driver_sql("SELECT pg_terminate_backend(%s)", (pid,))
                for _ in range(200):  # terminating is asynchronous: until it fails
                    conn.exec_driver_sql("SELECT 1").scalar_one()
                    time.sleep(0.01)

        with pytest.raises(sa.exc.DBAPIError):
            killed_mid_write()
        with db.write() as conn:  # a new connection, without an error
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() != pid
    finally:
        db.close()
        admin.close()


def test_close_ends_the_connections_kept_between_transactions(pg_url: str) -> None:
    db = Database(pg_url)
    admin = Database(pg_url)
    try:
        with db.read() as conn:
            reader = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with db.write() as conn:
            writer = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        db.close()
        for _ in range(200):  # a backend ends asynchronously after its client left
            if not (_backend_alive(admin, reader) or _backend_alive(admin, writer)):
                break
            time.sleep(0.01)
        assert not _backend_alive(admin, reader)
        assert not _backend_alive(admin, writer)
    finally:
        admin.close()


def test_a_write_after_a_read_takes_the_write_lock_at_begin(settings: Settings) -> None:
    other = Database(settings.database_url, busy_timeout_ms=50)
    other.upgrade()
    db = Database(settings.database_url)
    try:
        with db.read() as conn:  # leaves a read connection for the next transaction
            _count(conn)
        with db.write():  # BEGIN IMMEDIATE: the lock is held before any statement
            locked = (sa.exc.OperationalError, sqlite3.OperationalError)  # raised at BEGIN
            with pytest.raises(locked, match="locked"), other.write():
                pass
    finally:
        db.close()
        other.close()


def test_a_disposed_engine_hands_out_new_connections(settings: Settings) -> None:
    db = Database(settings.database_url)
    opened: list[object] = []
    try:
        with db.write() as conn:
            conn.exec_driver_sql("SELECT 1")
        db.engine.dispose()
        sa.event.listen(db.engine, "connect", lambda raw, _record: opened.append(raw))
        with db.write() as conn:
            conn.exec_driver_sql("SELECT 1")
        assert len(opened) == 1
    finally:
        db.close()


def test_threads_share_the_kept_connections_and_every_write_commits(any_db: Database) -> None:
    now = utcnow()

    def add(n: int) -> None:
        for i in range(20):
            with any_db.write() as conn:
                conn.execute(
                    t.agents.insert(),
                    {
                        "id": f"a{n}-{i}",
                        "name": f"agent {n} {i}",
                        "prompt": "",
                        "created_at": now,
                        "updated_at": now,
                    },
                )

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(add, range(4)))
    with any_db.read() as conn:
        assert _count(conn) == 80


def _add_agent(db: Database, name: str, seen: list[int]) -> int:
    """Write one agent (recording the thread it ran on); the thread's id."""
    with db.write() as conn:
        seen.append(threading.get_ident())
        now = utcnow()
        conn.execute(
            t.agents.insert(),
            {"id": name, "name": name, "prompt": "", "created_at": now, "updated_at": now},
        )
    return threading.get_ident()


async def test_run_writes_on_the_callers_thread_when_the_lock_is_free(db: Database) -> None:
    seen: list[int] = []
    assert await db.run(_add_agent, db, "ada", seen) == threading.get_ident()
    assert seen == [threading.get_ident()]  # one attempt, here: no hop to a worker thread
    with db.read() as conn:
        assert _count(conn) == 1


async def test_run_hands_a_write_that_would_wait_to_a_worker_thread(db: Database) -> None:
    """The write lock held by another process: the work starts once more in a worker
    thread, which waits its turn, while the event loop goes on."""
    holder = sqlite3.connect(db.url.database or "", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    seen: list[int] = []
    task = asyncio.create_task(db.run(_add_agent, db, "ada", seen))
    for _ in range(5):  # the loop is not blocked by the waiting write
        await asyncio.sleep(0.01)
    assert not task.done()
    assert not seen
    holder.execute("COMMIT")
    holder.close()
    worker = await task
    assert worker != threading.get_ident()
    assert seen == [worker]  # the attempt here stopped at BEGIN, before its body
    with db.read() as conn:
        assert _count(conn) == 1


async def test_run_cancelled_while_the_lock_is_taken_still_writes_then_says_so(
    db: Database,
) -> None:
    """As with a hop to a worker thread: the caller is told of its cancellation once the
    work has run (a turn records its interruption after the step it was writing)."""
    holder = sqlite3.connect(db.url.database or "", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    task = asyncio.create_task(db.run(_add_agent, db, "ada", []))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0.05)
    holder.execute("COMMIT")
    holder.close()
    with pytest.raises(asyncio.CancelledError):
        await task
    with db.read() as conn:
        assert _count(conn) == 1


async def test_run_on_postgresql_runs_in_a_worker_thread(pg_url: str) -> None:
    db = Database(pg_url)
    db.upgrade()
    try:
        seen: list[int] = []
        assert await db.run(_add_agent, db, "ada", seen) != threading.get_ident()
    finally:
        db.close()


async def test_run_checkpoints_the_wal_in_a_thread_of_its_own(db: Database) -> None:
    """A write on the caller's thread does not checkpoint as it commits (a checkpoint
    syncs the disk), not even past SQLite's 1,000-page mark; every CHECKPOINT_EVERY of
    them a checkpoint runs in another thread, copying the WAL into the database file."""
    from opencrab.store.database import CHECKPOINT_EVERY

    main = Path(db.url.database or "")
    before = main.stat().st_size
    big = "x" * 6_000_000  # ~1,500 pages: SQLite's default would checkpoint at the commit

    def add_big() -> None:
        with db.write() as conn:
            now = utcnow()
            conn.execute(
                t.agents.insert(),
                {"id": "big", "name": "big", "prompt": big, "created_at": now, "updated_at": now},
            )

    await db.run(add_big)
    assert main.stat().st_size == before  # still all in the WAL
    for n in range(CHECKPOINT_EVERY - 1):
        await db.run(_add_agent, db, f"a{n}", [])
    for thread in threading.enumerate():
        if thread.name == "opencrab-wal":
            thread.join(30)
    assert main.stat().st_size > before + len(big)  # checkpointed into the file
    with db.read() as conn:
        assert _count(conn) == CHECKPOINT_EVERY


async def test_a_database_nobody_holds_is_freed_with_its_connections(data_dir: Path) -> None:
    """No reference cycle keeps a Database (and the connections `run` opened for its
    writes) alive until the cyclic garbage collector comes by."""
    db = Database(f"sqlite:///{data_dir / 'freed.db'}")
    db.upgrade()
    await db.run(_add_agent, db, "ada", [])
    gone = weakref.ref(db)
    given_back: list[object] = []
    sa.event.listen(db.engine.pool, "checkin", lambda *_: given_back.append(1))
    del db
    assert gone() is None
    assert given_back  # its connections went back to the pool, which goes with it
