"""Two real `opencrab up` processes on one data directory share the work by lease: each
agent's heartbeat ticks in exactly one of them (the agents shared fairly, each slot ticked
once), a `kill -9`'d process's agents tick on in the other once its leases expire, and
one session never runs two turns at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import httpx
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.leases import LeaseStore, turn_key
from opencrab.store.tables import heartbeat_log
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.served import ServedOpenCrab, make_agents, wait_for

FAST_LEASES = {"OPENCRAB_DATABASE__LEASE_TTL_SECS": "5"}  # a crash is noticed in seconds;
# renewals every ttl/3 keep a lease through a loaded machine's stalls


def ticks(db: Database) -> dict[str, list[tuple[str, datetime]]]:
    """Each agent's logged ticks in order: (the process (lease owner) that ticked, the
    slot it ticked: when, less how late)."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                heartbeat_log.c.agent_id, heartbeat_log.c.result_json, heartbeat_log.c.created_at
            ).order_by(heartbeat_log.c.id)
        ).all()
    out: dict[str, list[tuple[str, datetime]]] = {}
    for r in rows:
        result = r.result_json or {}
        slot = r.created_at - timedelta(milliseconds=int(result.get("late_ms", 0)))
        out.setdefault(str(r.agent_id), []).append((str(result.get("process")), slot))
    return out


def owner_of(served: ServedOpenCrab, processes: set[str]) -> str:
    """The lease owner name of `served` among the names seen (host:pid:random)."""
    found = [p for p in processes if p.split(":")[1] == str(served.pid)]
    assert len(found) == 1, (served.pid, processes)
    return found[0]


def agents_held(store: LeaseStore, owner: str) -> list[str]:
    return [k for k in store.held_by(owner) if k.startswith("heartbeat:")]


def test_each_agent_ticks_in_one_process_and_moves_on_after_kill_9(
    data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    data = data_dir / "shared"
    db = Database(f"sqlite:///{data / 'opencrab.db'}")
    store = LeaseStore(db)
    first = ServedOpenCrab(data, llm=fake_llm_server, env=FAST_LEASES).start()
    second: ServedOpenCrab | None = None
    try:
        older = make_agents(first, ["ann", "ben", "cy"], interval=2)
        second = ServedOpenCrab(data, llm=fake_llm_server, env=FAST_LEASES).start()
        newer = make_agents(second, ["dee", "eve"], interval=3)
        everyone = older + newer
        interval = dict.fromkeys(older, 2) | dict.fromkeys(newer, 3)

        wait_for(
            "every agent to tick three times",
            lambda: all(len(ticks(db).get(a, [])) >= 3 for a in everyone),
        )
        seen = ticks(db)
        processes = {p for a in everyone for p, _ in seen[a]}
        a_owner, b_owner = owner_of(first, processes), owner_of(second, processes)
        assert processes == {a_owner, b_owner}
        # both up: the five agents are shared, at most three (5 / 2, rounded up) each
        wait_for(
            "the two to share the agents",
            lambda: sorted(map(len, (agents_held(store, o) for o in (a_owner, b_owner)))) == [2, 3],
        )
        on_the_first = [a.removeprefix("heartbeat:") for a in agents_held(store, a_owner)]

        first.kill()  # no shutdown: its leases stay until they expire
        killed = datetime.now(UTC)
        wait_for(
            "the second process to tick the first one's agents",
            lambda: all(
                sum(p == b_owner and t > killed for p, t in ticks(db)[a]) >= 2 for a in on_the_first
            ),
        )
        after = ticks(db)
        for agent in everyone:
            assert {p for p, _ in after[agent]} <= {a_owner, b_owner}
            assert all(p == b_owner for p, t in after[agent] if t > killed)
            # one tick per slot, whichever process held the agent: both put an agent on
            # the same slots, and a slot due before a handover is the previous holder's
            slots = sorted(t for _, t in after[agent])
            for t1, t2 in pairwise(slots):
                assert (t2 - t1).total_seconds() > interval[agent] * 0.9, after[agent]
        assert agents_held(store, a_owner) == []  # every lease of the dead one was taken over
        assert len(agents_held(store, b_owner)) == len(everyone)

        second.stop()  # a clean shutdown lets go of every lease at once
        assert store.held_by(b_owner) == []
    finally:
        first.stop()
        if second is not None:
            second.stop()
        db.close()


def test_a_session_runs_one_turn_at_a_time_across_processes(
    data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    data = data_dir / "shared"
    held = threading.Event()
    fake_llm_server.reply(CHAT, Reply(gate=held, json=completion({"content": "slow answer"})))
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "quick answer"})))
    with (
        ServedOpenCrab(data, llm=fake_llm_server) as first,
        ServedOpenCrab(data, llm=fake_llm_server) as second,
        httpx.Client(timeout=60, headers=first.headers) as client,  # one database: one token
    ):
        body = {"name": "solo", "prompt": "You are terse.", "heartbeat": {"enabled": False}}
        agent = client.post(first.url + "/api/agents", json=body).json()
        session = client.post(first.url + "/api/sessions", json={"agentId": agent["id"]}).json()
        messages = f"/api/sessions/{session['id']}/messages"
        slow: list[httpx.Response] = []
        waited: list[httpx.Response] = []
        turn = threading.Thread(
            target=lambda: slow.append(client.post(first.url + messages, json={"content": "1"}))
        )
        turn.start()
        other = threading.Thread(
            target=lambda: waited.append(client.post(second.url + messages, json={"content": "2"}))
        )
        try:
            wait_for("the first turn to reach the model", lambda: len(fake_llm_server.requests) > 0)
            other.start()  # the second process waits for the first's turn (no 409)
            other.join(3)
            assert not waited, waited[0].text
        finally:
            held.set()
            turn.join(60)
            other.join(120)
        assert slow[0].status_code == 201, slow[0].text
        assert waited[0].status_code == 201, waited[0].text
        said = client.get(second.url + messages).json()
        assert [(m["role"], m["content"]) for m in said] == [
            ("user", "1"),
            ("assistant", "slow answer"),
            ("user", "2"),  # stored once the first turn had ended
            ("assistant", "quick answer"),
        ]
        db = Database(f"sqlite:///{data / 'opencrab.db'}")
        assert LeaseStore(db).get(turn_key(session["id"])) is None  # let go after each turn
        db.close()


def test_an_agent_made_through_one_up_ticks_in_the_other_after_kill_9(
    data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    """`opencrab up` reads the agent list again every --refresh-secs (as the worker
    does): an agent made through the first server after both started is followed by the
    second too, which ticks it once the process holding its lease is killed."""
    data = data_dir / "shared"
    db = Database(f"sqlite:///{data / 'opencrab.db'}")
    refresh = ("--refresh-secs", "0.5")
    first = ServedOpenCrab(data, llm=fake_llm_server, env=FAST_LEASES, args=refresh).start()
    second: ServedOpenCrab | None = None
    try:
        second = ServedOpenCrab(data, llm=fake_llm_server, env=FAST_LEASES, args=refresh).start()
        servers = {first.pid: first, second.pid: second}
        (made,) = make_agents(first, ["fay"], interval=2)  # after both are up
        wait_for("the new agent to tick twice", lambda: len(ticks(db).get(made, [])) >= 2)
        (holding,) = {p for p, _ in ticks(db)[made]}  # one process ticks it (the first, as a rule)
        holder = servers[int(holding.split(":")[1])]
        holder.kill()
        wait_for(
            "the other process to tick the agent",
            lambda: any(p != holding for p, _ in ticks(db)[made]),
        )
        ticked = [p for p, _ in ticks(db)[made]]
        handover = next(n for n, p in enumerate(ticked) if p != holding)
        assert set(ticked[:handover]) == {holding}
        heir = ticked[handover]
        assert set(ticked[handover:]) == {heir}, ticked
        assert {holding, heir} == {owner_of(first, set(ticked)), owner_of(second, set(ticked))}
        # the second ticked it (before or after the kill): it followed an agent it never made
    finally:
        first.stop()
        if second is not None:
            second.stop()
        db.close()


def test_a_turn_killed_with_its_process_does_not_hold_the_session(
    data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    """`kill -9` mid-turn: the session's lease would last its ttl (600 s here), but its
    owner's process is gone, so a new process's turn in the session gets in at once."""
    data = data_dir / "shared"
    never = threading.Event()  # the model never answers the first turn
    fake_llm_server.reply(CHAT, Reply(gate=never, json=completion({"content": "too late"})))
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "after the crash"})))
    long_leases = {"OPENCRAB_DATABASE__LEASE_TTL_SECS": "600"}
    db = Database(f"sqlite:///{data / 'opencrab.db'}")
    first = ServedOpenCrab(data, llm=fake_llm_server, env=long_leases).start()
    try:
        with httpx.Client(timeout=60, headers=first.headers) as client:  # one database: one token
            body = {"name": "solo", "prompt": "You are terse.", "heartbeat": {"enabled": False}}
            agent = client.post(first.url + "/api/agents", json=body).json()
            session = client.post(first.url + "/api/sessions", json={"agentId": agent["id"]})
            messages = f"/api/sessions/{session.json()['id']}/messages"
            cut: list[BaseException] = []

            def first_turn() -> None:
                try:
                    client.post(first.url + messages, json={"content": "1"})
                except httpx.TransportError as error:
                    cut.append(error)  # its server was killed mid-turn

            turn = threading.Thread(target=first_turn)
            turn.start()
            wait_for("the first turn to reach the model", lambda: len(fake_llm_server.requests) > 0)
            lease = LeaseStore(db).get(turn_key(session.json()["id"]))
            assert lease is not None
            assert lease.owner.split(":")[1] == str(first.pid)
            assert lease.expires_at - lease.acquired_at == timedelta(seconds=600)
            first.kill()
            turn.join(60)
            assert len(cut) == 1

            with ServedOpenCrab(data, llm=fake_llm_server, env=long_leases) as second:
                after = client.post(second.url + messages, json={"content": "2"})
                assert after.status_code == 201, after.text
                assert after.json()["turn"]["reply"]["content"] == "after the crash"
                assert LeaseStore(db).get(turn_key(session.json()["id"])) is None
    finally:
        never.set()
        first.stop()
        db.close()
