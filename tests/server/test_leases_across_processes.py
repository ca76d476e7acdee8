"""Two real `opencrab up` processes on one data directory share the work by lease: each
agent's heartbeat ticks in exactly one of them, a `kill -9`'d process's agents tick on in
the other once its leases expire, and one session never runs two turns at once."""

from __future__ import annotations

import threading
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


def ticks(db: Database) -> dict[str, list[str]]:
    """Each agent's logged ticks in order, as the process (lease owner) that ticked."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(heartbeat_log.c.agent_id, heartbeat_log.c.result_json).order_by(
                heartbeat_log.c.id
            )
        ).all()
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(str(r.agent_id), []).append(str((r.result_json or {}).get("process")))
    return out


def owner_of(served: ServedOpenCrab, processes: set[str]) -> str:
    """The lease owner name of `served` among the names seen (host:pid:random)."""
    found = [p for p in processes if p.split(":")[1] == str(served.pid)]
    assert len(found) == 1, (served.pid, processes)
    return found[0]


def test_each_agent_ticks_in_one_process_and_moves_on_after_kill_9(
    data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    data = data_dir / "shared"
    db = Database(f"sqlite:///{data / 'opencrab.db'}")
    first = ServedOpenCrab(data, llm=fake_llm_server, env=FAST_LEASES).start()
    second: ServedOpenCrab | None = None
    try:
        older = make_agents(first.url, ["ann", "ben", "cy"], interval=2)
        second = ServedOpenCrab(data, llm=fake_llm_server, env=FAST_LEASES).start()
        newer = make_agents(second.url, ["dee", "eve"], interval=3)  # only the second knows
        everyone = older + newer

        wait_for(
            "every agent to tick three times",
            lambda: all(len(ticks(db).get(a, [])) >= 3 for a in everyone),
        )
        seen = ticks(db)
        processes = {p for a in everyone for p in seen[a]}
        a_owner, b_owner = owner_of(first, processes), owner_of(second, processes)
        assert processes == {a_owner, b_owner}
        # both up: the first holds the agents it had, the second those it made, and
        # nobody ticks an agent the other one holds
        for agent in older:
            assert set(seen[agent]) == {a_owner}, seen[agent]
        for agent in newer:
            assert set(seen[agent]) == {b_owner}, seen[agent]

        first.kill()  # no shutdown: its leases stay until they expire
        wait_for(
            "the second process to tick the first one's agents",
            lambda: all(ticks(db)[a].count(b_owner) >= 2 for a in older),
        )
        after = ticks(db)
        for agent in older:  # the first's ticks, then the second's: never both in turn
            ticked = after[agent]
            handover = ticked.index(b_owner)
            assert set(ticked[:handover]) == {a_owner}
            assert set(ticked[handover:]) == {b_owner}, ticked
        for agent in newer:
            assert set(after[agent]) == {b_owner}
        store = LeaseStore(db)
        assert store.held_by(a_owner) == []  # every lease of the dead one was taken over
        assert len(store.held_by(b_owner)) == len(everyone)

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
        httpx.Client(timeout=60) as client,
    ):
        body = {"name": "solo", "prompt": "You are terse.", "heartbeat": {"enabled": False}}
        agent = client.post(first.url + "/api/agents", json=body).json()
        session = client.post(first.url + "/api/sessions", json={"agentId": agent["id"]}).json()
        messages = f"/api/sessions/{session['id']}/messages"
        slow: list[httpx.Response] = []
        turn = threading.Thread(
            target=lambda: slow.append(client.post(first.url + messages, json={"content": "1"}))
        )
        turn.start()
        try:
            wait_for("the first turn to reach the model", lambda: len(fake_llm_server.requests) > 0)
            busy = client.post(second.url + messages, json={"content": "2"})
        finally:
            held.set()
            turn.join(60)
        assert busy.status_code == 409, busy.text
        assert busy.json() == {
            "error": "session_busy",
            "message": f"session {session['id']} is running a turn in another process; "
            "try again when that turn has ended",
        }
        assert slow[0].status_code == 201, slow[0].text
        after = client.post(second.url + messages, json={"content": "3"})
        assert after.status_code == 201, after.text
        said = client.get(second.url + messages).json()
        assert [(m["role"], m["content"]) for m in said] == [
            ("user", "1"),
            ("assistant", "slow answer"),
            ("user", "3"),  # the refused message was not stored
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
        (made,) = make_agents(first.url, ["fay"], interval=2)  # after both are up
        wait_for("the new agent to tick twice", lambda: len(ticks(db).get(made, [])) >= 2)
        (holding,) = set(ticks(db)[made])  # one process ticks it (the first, as a rule)
        holder = servers[int(holding.split(":")[1])]
        holder.kill()
        wait_for(
            "the other process to tick the agent",
            lambda: any(p != holding for p in ticks(db)[made]),
        )
        ticked = ticks(db)[made]
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
