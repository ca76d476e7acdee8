"""The live event hub on a real PostgreSQL: rows that commit out of seq order are never
skipped, a rolled-back seq is given up in time, and another process's commits wake the
hub through LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.server.live import Client, EventHub
from opencrab.store import Database
from opencrab.store.dialects import LiveTail, live_tail
from opencrab.store.tables import events
from opencrab.store.types import format_timestamp, utcnow

TRACE = str(uuid.uuid4())


@pytest.fixture
def pg(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url)
    database.upgrade()
    yield database
    database.close()


def insert(conn: Connection, text: str) -> int:
    """Insert one message event on TRACE (uncommitted until the caller commits); its seq."""
    row = {
        "id": str(uuid.uuid4()),
        "trace_id": TRACE,
        "parent_id": None,
        "type": "message",
        "timestamp": format_timestamp(utcnow()),
        "content": json.dumps({"text": text}),
    }
    return int(conn.execute(events.insert().values(row).returning(events.c.seq)).scalar_one())


def received(client: Client) -> list[str]:
    out = []
    while not client.outbox.empty():
        out.append(json.loads(client.outbox.get_nowait())["event"]["content"]["text"])
    return out


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_lower_seq_committing_after_a_higher_one_is_delivered(pg: Database) -> None:
    hub = EventHub(pg, poll_secs=3600)
    client = Client()
    await hub.subscribe(client, "s", [TRACE])
    with pg.engine.connect() as slow, pg.engine.connect() as quick:
        low = insert(slow, "first in, last to commit")
        high = insert(quick, "second in, first to commit")
        quick.commit()
        assert low < high
        await hub.deliver_new()
        assert received(client) == ["second in, first to commit"]
        slow.commit()
    await hub.deliver_new()
    assert received(client) == ["first in, last to commit"]
    assert hub.gaps == {}
    await hub.deliver_new()
    assert received(client) == []  # nothing twice


async def test_a_rolled_back_seq_is_given_up_after_the_gap_window(pg: Database) -> None:
    clock = Clock()
    tail = live_tail("postgresql")
    hub = EventHub(pg, poll_secs=3600, clock=clock)
    client = Client()
    await hub.subscribe(client, "s", [TRACE])
    with pg.engine.connect() as lost, pg.engine.connect() as kept:
        gone = insert(lost, "rolled back")
        insert(kept, "kept")
        kept.commit()
        lost.rollback()
    await hub.deliver_new()
    assert received(client) == ["kept"]
    assert list(hub.gaps) == [gone]  # might still commit, as far as the hub can tell
    clock.now += tail.gap_secs - 1
    await hub.deliver_new()
    assert list(hub.gaps) == [gone]
    clock.now += 2
    await hub.deliver_new()
    assert hub.gaps == {}
    assert received(client) == []


async def test_a_hub_starting_now_looks_for_seqs_still_uncommitted(pg: Database) -> None:
    hub = EventHub(pg, poll_secs=3600)
    client = Client()
    with pg.engine.connect() as slow, pg.engine.connect() as quick:
        insert(slow, "open while the hub starts")
        insert(quick, "committed before the hub starts")
        quick.commit()
        await hub.subscribe(client, "s", [TRACE])  # history up to here is the caller's to read
        slow.commit()
    await hub.deliver_new()
    assert received(client) == ["open while the hub starts"]


async def test_another_processs_commit_wakes_the_hub(pg: Database, pg_url: str) -> None:
    hub = EventHub(pg, poll_secs=3600)  # it never polls: only a notification wakes it
    client = Client()
    await hub.subscribe(client, "s", [TRACE])
    feed = asyncio.create_task(hub.run())
    other = Database(pg_url)  # another process's handle on the same database
    try:
        await asyncio.to_thread(lambda: _insert_committed(other, "from elsewhere"))
        message = await asyncio.wait_for(client.outbox.get(), 60)
        assert json.loads(message)["event"]["content"]["text"] == "from elsewhere"
    finally:
        await hub.stop()
        await feed
        other.close()


def _insert_committed(db: Database, text: str) -> None:
    with db.write() as conn:
        insert(conn, text)


def test_sqlite_tails_in_seq_order_and_postgresql_listens() -> None:
    assert live_tail("sqlite") == LiveTail(gap_secs=0.0, gap_window=0, listen=None)
    tail = live_tail("postgresql")
    assert tail.gap_secs > 0
    assert tail.listen is not None


def test_the_migration_installs_the_notify_trigger(pg: Database) -> None:
    def triggers() -> list[str]:
        with pg.read() as conn:
            return list(
                conn.execute(
                    sa.text(
                        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'events'::regclass "
                        "AND NOT tgisinternal"
                    )
                ).scalars()
            )

    assert triggers() == ["events_notify"]


async def test_subscribing_reads_the_store_off_the_event_loop(pg: Database, pg_url: str) -> None:
    """A hub that nobody followed reads where the log ends when the first client comes:
    in a worker thread, so a slow read never stalls the server's event loop."""
    with pg.engine.connect() as conn:
        seq = insert(conn, "already there")
        conn.commit()
    hub = EventHub(pg, poll_secs=3600)
    client = Client()
    other = Database(pg_url)
    released = threading.Lock()

    def release() -> None:  # (at once below; a timer too, should the read block the loop)
        if released.acquire(blocking=False):
            locker.rollback()

    try:
        with other.engine.connect() as locker:
            locker.exec_driver_sql("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
            safety = threading.Timer(60, release)
            safety.start()
            subscribing = asyncio.ensure_future(hub.subscribe(client, "s", [TRACE]))
            for _ in range(50):  # the loop runs on while the read waits for the table
                await asyncio.sleep(0)
            assert not subscribing.done()
            assert not released.locked()  # (the safety timer did not fire)
            release()
            safety.cancel()
            assert await subscribing == seq
    finally:
        other.close()
    assert client.traces == {TRACE: "s"}
