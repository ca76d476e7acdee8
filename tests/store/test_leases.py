"""Leases on a real SQLite file and a real PostgreSQL: taken once, renewed, expired, let go
of; from threads and from several processes at once (BEGIN IMMEDIATE on SQLite,
SELECT … FOR UPDATE SKIP LOCKED on PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.errors import ConflictError
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import PROCESS_OWNER, LeaseStore, heartbeat_key, member_key, turn_key
from opencrab.store.tables import leases


def test_a_lease_is_taken_once_and_renewed_by_its_owner(any_db: Database) -> None:
    store = LeaseStore(any_db)
    assert store.try_acquire("turn:s1", "a", ttl_secs=60)
    first = store.get("turn:s1")
    assert first is not None
    assert first.owner == "a"

    assert not store.try_acquire("turn:s1", "b", ttl_secs=60)  # a holds it
    assert store.try_acquire("turn:s1", "a", ttl_secs=60)  # again: renewed
    again = store.get("turn:s1")
    assert again is not None
    assert again.owner == "a"
    assert again.acquired_at == first.acquired_at
    assert again.renewed_at >= first.renewed_at
    assert again.expires_at >= first.expires_at


def test_an_expired_lease_goes_to_whoever_asks(any_db: Database) -> None:
    store = LeaseStore(any_db)
    assert store.try_acquire("heartbeat:x", "dead", ttl_secs=0)  # expires at once
    assert store.try_acquire("heartbeat:x", "alive", ttl_secs=60)
    lease = store.get("heartbeat:x")
    assert lease is not None
    assert lease.owner == "alive"
    # the old owner cannot renew what it lost, nor take it back while it is valid
    assert store.exchange("dead", 60, renew=["heartbeat:x"]) == set()
    assert not store.try_acquire("heartbeat:x", "dead", ttl_secs=60)


def test_renew_keeps_own_leases_and_never_takes_free_ones(any_db: Database) -> None:
    store = LeaseStore(any_db)
    store.acquire(["k1", "k2"], "a", 60)
    store.acquire(["k3"], "b", 60)
    assert store.exchange("a", 60, renew=["k1", "k2", "k3", "free"]) == {"k1", "k2"}
    assert store.get("free") is None  # renewing never takes a lease
    assert store.exchange("a", 60, take=["free"], renew=["k1"], release=["k2"]) == {"free", "k1"}
    assert store.held_by("a") == ["free", "k1"]


def test_release_lets_go_of_own_leases_only(any_db: Database) -> None:
    store = LeaseStore(any_db)
    store.acquire(["k1", "k2"], "a", 60)
    store.acquire(["k3"], "b", 60)
    store.release(["k1", "k3"], "a")
    assert store.get("k1") is None
    assert store.get("k3") is not None  # b's
    assert store.try_acquire("k1", "b", 60)
    assert store.release_all("a") == 1  # k2
    assert store.held_by("a") == []
    assert store.held_by("b") == ["k1", "k3"]


def test_many_keys_in_one_call(any_db: Database) -> None:
    store = LeaseStore(any_db)
    keys = [heartbeat_key(f"agent-{i}") for i in range(1200)]  # more than one chunk
    assert store.acquire(keys[:700], "a", 60) == set(keys[:700])
    assert store.acquire(keys, "b", 60) == set(keys[700:])
    assert len(store.held_by("a")) == 700
    assert len(store.held_by("b")) == 500


def test_keys_and_owner_name_what_is_leased_and_by_which_process() -> None:
    assert turn_key("s") == "turn:s"
    assert heartbeat_key("a") == "heartbeat:a"
    host, pid, _ = PROCESS_OWNER.split(":")
    assert host
    assert int(pid) > 0


def test_threads_racing_for_the_same_keys_each_key_goes_to_one(store_url: str) -> None:
    url = store_url
    Database(url).upgrade()
    keys = [f"turn:{i}" for i in range(40)]
    won: dict[str, list[str]] = {}
    start = threading.Barrier(6)

    def race(owner: str) -> None:
        store = LeaseStore(Database(url))  # a handle of its own, as another process has
        start.wait()
        won[owner] = [k for k in keys if store.try_acquire(k, owner, 60)]

    threads = [threading.Thread(target=race, args=(f"t{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken = [k for keys_won in won.values() for k in keys_won]
    assert sorted(taken) == sorted(keys)  # every key once, none twice
    store = LeaseStore(Database(url))
    for owner, keys_won in won.items():
        assert store.held_by(owner) == sorted(keys_won)


RACER = textwrap.dedent(
    """
    import json, random, sys
    from opencrab.store import Database
    from opencrab.store.leases import PROCESS_OWNER, LeaseStore
    store = LeaseStore(Database(sys.argv[1]))
    keys = [f"heartbeat:{i}" for i in range(60)]
    random.shuffle(keys)
    print("ready", flush=True)
    sys.stdin.readline()  # go
    won = [k for k in keys if store.try_acquire(k, PROCESS_OWNER, 60)]
    print(json.dumps({"owner": PROCESS_OWNER, "won": won}), flush=True)
    sys.stdin.readline()  # stay alive: a gone owner's leases are free for the others
    """
)


def test_processes_racing_for_the_same_keys_each_key_goes_to_one(store_url: str) -> None:
    url = store_url
    Database(url).upgrade()
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for racer in racers:  # every process is up before any starts taking
        assert racer.stdout is not None
        assert racer.stdout.readline() == "ready\n"
    outputs = []
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    for racer in racers:  # every racer is done taking before any exits
        assert racer.stdout is not None
        outputs.append(json.loads(racer.stdout.readline()))
    for racer in racers:
        racer.communicate("exit\n", timeout=60)
        assert racer.returncode == 0
    taken = [k for o in outputs for k in o["won"]]
    assert sorted(taken) == sorted(f"heartbeat:{i}" for i in range(60))
    assert len({o["owner"] for o in outputs}) == 3  # one owner name per process
    store = LeaseStore(Database(url))
    for o in outputs:
        assert store.held_by(o["owner"]) == sorted(o["won"])


# ------------------------------------------------------------------ the keeper
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_holding_takes_the_lease_for_the_block_and_refuses_a_held_one(
    any_db: Database,
) -> None:
    store = LeaseStore(any_db)
    keeper = LeaseKeeper(store, owner="me", ttl_secs=60)
    async with keeper.holding("turn:s", busy=lambda: ConflictError("busy")):
        assert keeper.holds("turn:s")
        lease = store.get("turn:s")
        assert lease is not None
        assert lease.owner == "me"
    assert store.get("turn:s") is None
    assert not keeper.holds("turn:s")

    assert store.try_acquire("turn:s", "other", 60)
    with pytest.raises(ConflictError, match="busy"):
        async with keeper.holding("turn:s", busy=lambda: ConflictError("busy")):
            raise AssertionError("ran without the lease")
    lease = store.get("turn:s")
    assert lease is not None
    assert lease.owner == "other"


async def test_a_wanted_lease_is_taken_once_free_and_renewed_by_each_pass(any_db: Database) -> None:
    store = LeaseStore(any_db)
    clock = Clock()
    mine = LeaseKeeper(store, owner="mine", ttl_secs=60, clock=clock)
    theirs = LeaseKeeper(store, owner="theirs", ttl_secs=60)
    theirs.want("heartbeat:a")
    await theirs.run_pass()
    mine.want("heartbeat:a")
    mine.want("heartbeat:b")
    await mine.run_pass()
    assert theirs.holds("heartbeat:a")
    assert not mine.holds("heartbeat:a")
    assert mine.holds("heartbeat:b")

    await theirs.close()  # a clean shutdown lets go at once
    assert store.held_by("theirs") == []
    await mine.run_pass()
    assert mine.holds("heartbeat:a")
    # held only until the ttl since the last renewal runs out on this process's clock
    clock.now += 59
    assert mine.holds("heartbeat:a")
    clock.now += 1
    assert not mine.holds("heartbeat:a")
    await mine.run_pass()  # renewed
    assert mine.holds("heartbeat:a")
    before = store.get("heartbeat:a")
    await mine.run_pass()
    after = store.get("heartbeat:a")
    assert before is not None
    assert after is not None
    assert after.expires_at >= before.expires_at
    assert after.acquired_at == before.acquired_at


async def test_a_crashed_owners_lease_is_taken_over_after_it_expires(any_db: Database) -> None:
    store = LeaseStore(any_db)
    assert store.try_acquire("heartbeat:a", "crashed", ttl_secs=0)  # never renewed again
    keeper = LeaseKeeper(store, owner="survivor", ttl_secs=60)
    keeper.want("heartbeat:a")
    await keeper.run_pass()
    assert keeper.holds("heartbeat:a")
    lease = store.get("heartbeat:a")
    assert lease is not None
    assert lease.owner == "survivor"


async def test_a_lease_taken_over_elsewhere_is_no_longer_held(any_db: Database) -> None:
    store = LeaseStore(any_db)
    keeper = LeaseKeeper(store, owner="slow", ttl_secs=0)  # expires as soon as it is taken
    keeper.want("heartbeat:a")
    await keeper.run_pass()
    assert store.try_acquire("heartbeat:a", "fast", 60)
    await keeper.run_pass()
    assert not keeper.holds("heartbeat:a")
    lease = store.get("heartbeat:a")
    assert lease is not None
    assert lease.owner == "fast"


async def test_unwanted_leases_are_let_go_of_and_close_lets_go_of_all(any_db: Database) -> None:
    store = LeaseStore(any_db)
    keeper = LeaseKeeper(store, owner="me", ttl_secs=60)
    keeper.start()
    for key in ("heartbeat:a", "heartbeat:b"):
        keeper.want(key)
    await keeper.run_pass()
    keeper.unwant("heartbeat:a")
    assert not keeper.holds("heartbeat:a")  # at once, before its row is gone
    await keeper.run_pass()
    assert store.held_by("me") == ["heartbeat:b", member_key("me")]
    keeper.unwant("heartbeat:b")
    keeper.want("heartbeat:b")  # wanted again before the pass: still held
    assert keeper.holds("heartbeat:b")
    await keeper.close()
    assert store.held_by("me") == []
    assert not keeper.holds("heartbeat:b")


def test_a_row_another_transaction_is_deciding_on_is_skipped_not_waited_for(pg_url: str) -> None:
    db, other = Database(pg_url), Database(pg_url)  # two engines, as two processes have
    db.upgrade()
    store = LeaseStore(db)
    try:
        assert store.try_acquire("heartbeat:a", "gone", ttl_secs=0)  # expired: up for grabs
        with other.engine.connect() as deciding:  # another process is taking it right now
            deciding.execute(
                sa.select(leases).where(leases.c.key == "heartbeat:a").with_for_update()
            )
            # SKIP LOCKED: not free to take now, and no waiting on the other's lock
            assert not store.try_acquire("heartbeat:a", "me", ttl_secs=60)
            assert store.acquire(["heartbeat:a", "heartbeat:b"], "me", 60) == {"heartbeat:b"}
            deciding.rollback()  # it gave up
        assert store.try_acquire("heartbeat:a", "me", ttl_secs=60)
    finally:
        db.close()
        other.close()


async def test_passes_asked_for_at_once_run_one_after_another(any_db: Database) -> None:
    """Overlapping passes of one keeper each took the other's fresh rows for someone
    else's (PostgreSQL: the second insert finds the first's rows), forgot it held them,
    and an unwanted lease was then never let go of."""
    store = LeaseStore(any_db)
    keeper = LeaseKeeper(store, owner="me", ttl_secs=60)
    for key in ("heartbeat:a", "heartbeat:b"):
        keeper.want(key)
    await asyncio.gather(*(keeper.run_pass() for _ in range(4)))
    assert keeper.holds("heartbeat:a")
    assert keeper.holds("heartbeat:b")
    keeper.unwant("heartbeat:a")
    await asyncio.gather(*(keeper.run_pass() for _ in range(4)))
    assert store.held_by("me") == ["heartbeat:b", member_key("me")]
    await keeper.close()
    assert store.held_by("me") == []


@pytest.mark.parametrize("spins", range(8))
async def test_a_cancelled_keeper_task_ends_even_when_its_wait_ends_at_that_moment(
    any_db: Database, spins: int
) -> None:
    """The event loop's teardown cancels a keeper task nobody closed (a test that failed
    first). A cancellation arriving just as the wait between passes ends was swallowed
    by asyncio.wait_for on 3.11, and the task passed on for ever: the run hung."""
    keeper = LeaseKeeper(LeaseStore(any_db), owner="me", ttl_secs=0.03)
    keeper.want("heartbeat:a")
    keeper.start()
    task = keeper._task
    assert task is not None
    while keeper.passes < 2:  # the first passes done: it waits between passes now
        await asyncio.sleep(0.01)
    keeper.want("heartbeat:b")  # ends the wait
    for _ in range(spins):
        await asyncio.sleep(0)
    task.cancel()
    passes = keeper.passes
    while not task.done() and keeper.passes < passes + 5:
        await asyncio.sleep(0.01)
    assert task.done(), "the cancelled task kept running passes"
    assert task.cancelled()


def test_letting_go_is_tried_again_when_postgresql_breaks_a_deadlock(pg_url: str) -> None:
    """A clean shutdown deleting its leases while another process takes rows in another
    order: PostgreSQL aborts one of the two; letting go then tries again (it used to fail,
    and the leases stayed until they expired)."""
    db, other = Database(pg_url), Database(pg_url)
    db.upgrade()
    store = LeaseStore(db)
    try:
        assert store.acquire(["heartbeat:x", "heartbeat:y"], "me", 60) == {
            "heartbeat:x",
            "heartbeat:y",
        }
        released: list[int] = []
        failed: list[BaseException] = []
        with other.engine.connect() as taking:
            taking.execute(sa.select(leases).where(leases.c.key == "heartbeat:y").with_for_update())

            def let_go() -> None:
                try:
                    released.append(store.release_all("me"))
                except BaseException as exc:
                    failed.append(exc)

            worker = threading.Thread(target=let_go)
            worker.start()
            waiting = sa.text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            while not taking.execute(waiting).scalar():  # its DELETE waits for y
                worker.join(0.05)
            # x, which that DELETE holds: each waits for the other; PostgreSQL aborts
            # the one whose deadlock check runs first: mostly the letting go (it waited
            # first), on a loaded machine sometimes this one; either way letting go ends
            try:
                taking.execute(leases.delete().where(leases.c.key == "heartbeat:x"))
            except sa.exc.OperationalError as exc:
                if "deadlock detected" not in str(exc):
                    raise
            taking.rollback()  # the other process gives up; the retry goes through
            worker.join(60)
        assert not worker.is_alive()
        assert failed == []
        assert released == [2]
        assert store.held_by("me") == []
    finally:
        db.close()
        other.close()


# ------------------------------------------------------------------ fair shares
def held_counts(keepers: list[LeaseKeeper], keys: list[str]) -> list[int]:
    return [sum(k.holds(key) for key in keys) for k in keepers]


async def passes(keepers: list[LeaseKeeper], rounds: int = 3) -> None:
    for _ in range(rounds):  # each keeper's pass in turn, as their timers would run them
        for keeper in keepers:
            await keeper.run_pass()


async def test_keepers_share_the_wanted_leases_fairly_and_hand_over_on_joining_and_closing(
    any_db: Database,
) -> None:
    store = LeaseStore(any_db)
    keys = [heartbeat_key(str(n)) for n in range(30)]
    first, second, third = (LeaseKeeper(store, owner=name, ttl_secs=60) for name in "abc")
    for keeper in (first, second):
        for key in keys:
            keeper.want(key)
    await passes([first, second])
    assert held_counts([first, second], keys) == [15, 15]

    for key in keys:  # a third process joins: the other two let go of a third each
        third.want(key)
    await passes([third, first, second])
    assert held_counts([first, second, third], keys) == [10, 10, 10]
    for key in keys:  # each lease in exactly one keeper, and the store agrees
        holders = [k.owner for k in (first, second, third) if k.holds(key)]
        assert len(holders) == 1
        lease = store.get(key)
        assert lease is not None
        assert lease.owner == holders[0]

    await second.close()  # a clean shutdown: the two left take its ten over
    await passes([first, third])
    assert held_counts([first, third], keys) == [15, 15]
    assert store.held_by("b") == []
    await first.close()
    await third.close()


async def test_a_member_that_takes_nothing_does_not_leave_leases_unheld(any_db: Database) -> None:
    """A live member lease of a process that wants none of these leases (or has stalled)
    lowers the share of the others; a lease free at two passes in a row is taken anyway."""
    store = LeaseStore(any_db)
    assert store.try_acquire(member_key("idle"), "idle", ttl_secs=60)
    keys = [heartbeat_key(str(n)) for n in range(10)]
    keeper = LeaseKeeper(store, owner="busy", ttl_secs=60)
    for key in keys:
        keeper.want(key)
    await keeper.run_pass()
    assert held_counts([keeper], keys) == [5]  # its share of two members
    await keeper.run_pass()  # the other five were free at both passes
    assert held_counts([keeper], keys) == [10]
    await keeper.close()


async def test_a_lease_let_go_of_in_a_handover_counts_as_held_only_from_its_taking(
    any_db: Database,
) -> None:
    store = LeaseStore(any_db)
    clock = Clock()
    first = LeaseKeeper(store, owner="first", ttl_secs=60, clock=clock)
    second = LeaseKeeper(store, owner="second", ttl_secs=60, clock=clock)
    keys = [heartbeat_key(str(n)) for n in range(4)]
    for key in keys:
        first.want(key)
    await first.run_pass()
    clock.now += 10
    assert [first.held_for(key) for key in keys] == [10.0] * 4
    for key in keys:
        second.want(key)
    await passes([second, first])
    moved = [key for key in keys if second.holds(key)]
    assert len(moved) == 2
    assert all(not first.holds(key) and first.held_for(key) == 0.0 for key in moved)
    clock.now += 1
    assert [second.held_for(key) for key in moved] == [1.0, 1.0]
    assert all(first.held_for(key) == 11.0 for key in keys if key not in moved)
    await first.close()
    await second.close()


async def test_a_keeper_that_does_not_share_takes_every_free_lease(any_db: Database) -> None:
    store = LeaseStore(any_db)
    assert store.try_acquire(member_key("other"), "other", ttl_secs=60)
    keeper = LeaseKeeper(store, owner="greedy", ttl_secs=60, share=False)
    keys = [heartbeat_key(str(n)) for n in range(6)]
    for key in keys:
        keeper.want(key)
    await keeper.run_pass()
    assert held_counts([keeper], keys) == [6]
    assert store.held_by("greedy") == sorted(keys)  # no member lease
    await keeper.close()


async def test_a_dead_members_row_is_removed_by_a_living_members_pass(any_db: Database) -> None:
    store = LeaseStore(any_db)
    assert store.try_acquire(member_key("dead"), "dead", ttl_secs=-120)  # long expired
    assert store.try_acquire(member_key("late"), "late", ttl_secs=-1)  # may still renew
    keeper = LeaseKeeper(store, owner="alive", ttl_secs=60)
    keeper.want(heartbeat_key("a"))
    await keeper.run_pass()  # becomes a member
    await keeper.run_pass()  # renews: the rows expired for longer than a ttl go
    assert store.get(member_key("dead")) is None
    assert store.get(member_key("late")) is not None
    assert store.share_view("alive", [])[0] == 1  # only the living count
    await keeper.close()


async def test_passes_come_every_second_while_the_shares_settle(any_db: Database) -> None:
    """A lease let go of for a newcomer is taken again at the newcomer's next pass: while
    the shares move, a keeper with room passes every settle_secs, not every ttl/3."""
    store = LeaseStore(any_db)
    clock = Clock()
    keys = [heartbeat_key(str(n)) for n in range(20)]
    old, new = (LeaseKeeper(store, owner=o, ttl_secs=30, clock=clock) for o in ("old", "new"))
    for key in keys:
        old.want(key)
    await old.run_pass()  # alone: takes all twenty, a member from now on
    clock.now += 30  # a ttl without anything moving
    await old.run_pass()
    assert old.next_pass_in() == 10.0
    for key in keys:
        new.want(key)
    await new.run_pass()  # joins: two members now, nothing free yet, room for ten
    assert new.next_pass_in() == 1.0
    await old.run_pass()  # sees two members: lets go of ten, no room for more
    assert old.next_pass_in() == 10.0
    clock.now += 1.0
    await new.run_pass()  # its next pass, a second later: takes them
    assert held_counts([old, new], keys) == [10, 10]
    clock.now += 30.5  # a ttl with nothing moving: back to ttl/3
    await old.run_pass()
    await new.run_pass()
    await old.run_pass()
    await new.run_pass()
    assert (old.next_pass_in(), new.next_pass_in()) == (10.0, 10.0)
    await old.close()
    await new.close()


async def test_processes_started_together_share_within_seconds(any_db: Database) -> None:
    """Two processes starting at once: the first to write sees itself alone and takes
    everything; having just joined, it passes again a second later, sees the other and
    lets go of its share (not ttl/3 later)."""
    store = LeaseStore(any_db)
    clock = Clock()
    keys = [heartbeat_key(str(n)) for n in range(20)]
    first, second = (LeaseKeeper(store, owner=o, ttl_secs=30, clock=clock) for o in "ab")
    for keeper in (first, second):
        for key in keys:
            keeper.want(key)
    await first.run_pass()  # alone yet: takes all twenty
    await second.run_pass()  # two members, nothing free
    assert held_counts([first, second], keys) == [20, 0]
    assert (first.next_pass_in(), second.next_pass_in()) == (1.0, 1.0)
    clock.now += 1.0
    await first.run_pass()  # sees the other: lets go of ten
    clock.now += 0.5
    await second.run_pass()  # takes them
    assert held_counts([first, second], keys) == [10, 10]
    clock.now += 12.0  # the window of joining is over: every ttl/3 again
    await first.run_pass()
    await second.run_pass()
    assert (first.next_pass_in(), second.next_pass_in()) == (10.0, 10.0)
    await first.close()
    await second.close()


async def test_a_pass_sooner_than_ttl_over_3_renews_only_the_member_lease(
    any_db: Database,
) -> None:
    """Settle passes come every second; renewing every held lease each time would cost a
    write of thousands of rows a second. A lease renewed less than ttl/3 ago is left be."""
    store = LeaseStore(any_db)
    clock = Clock()
    keeper = LeaseKeeper(store, owner="me", ttl_secs=30, clock=clock)
    keys = [heartbeat_key(str(n)) for n in range(3)]
    for key in keys:
        keeper.want(key)
    await keeper.run_pass()

    def expiries() -> list[datetime]:
        found = [store.get(key) for key in [*keys, member_key("me")]]
        return [lease.expires_at for lease in found if lease is not None]

    before = expiries()
    clock.now += 1.0
    await keeper.run_pass()
    after = expiries()
    assert after[:3] == before[:3]
    assert after[3] > before[3]  # the member lease: renewed at every pass
    assert all(keeper.holds(key) for key in keys)
    clock.now += 9.0  # ttl/3 since their renewal
    await keeper.run_pass()
    assert all(renewed > old for renewed, old in zip(expiries()[:3], before[:3], strict=True))
    assert all(keeper.held_for(key) == 10.0 for key in keys)
    await keeper.close()


HOLDER = textwrap.dedent(
    """
    import os, sys
    from opencrab.store import Database
    from opencrab.store.leases import PROCESS_OWNER, LeaseStore
    assert LeaseStore(Database(sys.argv[1])).try_acquire(sys.argv[2], PROCESS_OWNER, 600)
    print(PROCESS_OWNER, flush=True)
    os._exit(0)  # as if killed: nothing is let go of
    """
)


def test_a_gone_processs_lease_is_taken_at_once_a_living_ones_is_not(
    store_url: str, any_db: Database
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", HOLDER, store_url, turn_key("s1")],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = done.stdout.strip()
    store = LeaseStore(any_db)
    lease = store.get(turn_key("s1"))
    assert lease is not None
    assert lease.owner == dead  # unexpired for ten minutes, but its process is gone
    assert store.live([turn_key("s1")]) == set()

    assert store.try_acquire(turn_key("s1"), "taker", ttl_secs=60)
    taken = store.get(turn_key("s1"))
    assert taken is not None
    assert taken.owner == "taker"

    # a living process of this machine, and owners this process cannot judge, keep theirs
    living = PROCESS_OWNER
    host, _, rest = living.split(":")
    elsewhere = f"{host}-other:999999:{rest}"  # another machine (or container)
    other_boot = f"{host}:999999:00000000.{rest.partition('.')[2]}"
    for holder in (living, elsewhere, other_boot, "a"):
        key = turn_key(f"held-by-{holder}")
        assert store.try_acquire(key, holder, ttl_secs=600)
        assert not store.try_acquire(key, "taker", ttl_secs=60), holder
        assert store.live([key]) == {key}


class _GatedStore(LeaseStore):
    """A LeaseStore whose share view waits for the test's word (a pass held mid-way)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.entered = threading.Event()
        self.go_on = threading.Event()

    def share_view(self, owner: str, keys: Any) -> tuple[int, set[str]]:
        self.entered.set()
        assert self.go_on.wait(60)
        return super().share_view(owner, keys)


async def test_a_lease_let_go_of_while_a_pass_waits_is_not_renewed_and_the_pass_ends(
    any_db: Database,
) -> None:
    """A ticket's run that ended (its lease let go of) while a pass of the keeper was
    waiting on the store made that pass fail (KeyError) and renew nothing."""
    store = _GatedStore(any_db)
    keeper = LeaseKeeper(store, owner="me", ttl_secs=60)
    assert await keeper.acquire_some(["ticket:a", "ticket:b"]) == {"ticket:a", "ticket:b"}
    keeper.want("heartbeat:x")
    passing = asyncio.create_task(keeper.run_pass())
    assert await asyncio.to_thread(store.entered.wait, 60)
    await keeper.release("ticket:a")
    store.go_on.set()
    await passing  # raised KeyError before
    assert not keeper.holds("ticket:a")
    assert keeper.holds("ticket:b")
    assert keeper.holds("heartbeat:x")
    assert store.held_by("me") == ["heartbeat:x", member_key("me"), "ticket:b"]
    await keeper.close()
