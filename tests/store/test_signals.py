"""Wake-ups on commit (store/signals.py): a committed write that signalled a channel runs
this process's callbacks once and notifies other processes (PostgreSQL); a rolled-back
one signals nothing, and leaves nothing behind for the connection's next transaction."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import sqlalchemy as sa

from opencrab.store import Database, signals

CHANNEL = "opencrab_test_signal"


def signal_and_fail(db: Database) -> None:
    """A write that signals, then fails: rolled back."""
    with db.write() as conn:
        signals.signal(conn, CHANNEL)
        raise RuntimeError("rolled back")


def test_a_commit_calls_back_once_and_a_rollback_not_at_all(any_db: Database) -> None:
    heard: list[str] = []
    stop = any_db.on_commit(CHANNEL, lambda: heard.append("commit"))
    with any_db.write() as conn:
        signals.signal(conn, CHANNEL)
        signals.signal(conn, CHANNEL)  # twice in one transaction: one wake-up
    assert heard == ["commit"]
    with pytest.raises(RuntimeError):
        signal_and_fail(any_db)
    with any_db.write() as conn:  # the same idle connection: nothing left over
        conn.execute(sa.text("SELECT 1"))
    with any_db.read() as conn:
        assert not signals.take(conn)
    assert heard == ["commit"]
    stop()
    with any_db.write() as conn:
        signals.signal(conn, CHANNEL)
    assert heard == ["commit"]


def test_a_failing_callback_does_not_fail_the_committed_write(any_db: Database) -> None:
    heard: list[str] = []

    def broken() -> None:
        raise ValueError("a waiter's bug")

    any_db.on_commit(CHANNEL, broken)
    any_db.on_commit(CHANNEL, lambda: heard.append("after"))
    with any_db.write() as conn:
        signals.signal(conn, CHANNEL)
    assert heard == ["after"]


def test_sqlite_has_no_listener(db: Database) -> None:
    assert signals.listen(db, CHANNEL, lambda: None) is None


async def test_postgresql_notifies_listeners_on_commit_only(pg_url: str) -> None:
    db = Database(pg_url)
    db.upgrade()
    woken = asyncio.Event()
    calls = 0

    def wake() -> None:
        nonlocal calls
        calls += 1
        woken.set()

    listening = signals.listen(db, CHANNEL, wake)
    assert listening is not None
    task = asyncio.create_task(listening)
    try:
        await asyncio.wait_for(woken.wait(), 30)  # once on listening
        woken.clear()
        with pytest.raises(RuntimeError):
            signal_and_fail(db)
        with db.write() as conn:
            signals.signal(conn, CHANNEL)
        await asyncio.wait_for(woken.wait(), 30)
        assert calls == 2  # the listening one and the commit; the rollback sent nothing
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        db.close()
