"""Three real processes on one PostgreSQL database — two `opencrab up` and one `opencrab
worker` — share 100 agents' heartbeats by lease: every tick happens in one process, none
twice; after `kill -9` of a server its agents tick on in another process (the worker or
the other server: both follow every agent) once their leases expire; and a WebSocket on
one server sees a turn posted to the other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from websockets.sync.client import connect

from opencrab.store import Database
from opencrab.store.leases import LeaseStore
from opencrab.store.tables import heartbeat_log
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.served import ServedOpenCrab, make_agents, wait_for

INTERVALS = (2, 3, 5)  # short primes


def ticks(db: Database) -> dict[str, list[tuple[str, datetime, int]]]:
    """Each agent's logged ticks in order: (the process that ticked, when, ms late)."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                heartbeat_log.c.agent_id, heartbeat_log.c.result_json, heartbeat_log.c.created_at
            ).order_by(heartbeat_log.c.created_at, heartbeat_log.c.id)
        ).all()
    out: dict[str, list[tuple[str, datetime, int]]] = {}
    for r in rows:
        result = r.result_json or {}
        late = int(result.get("late_ms", 0))
        out.setdefault(str(r.agent_id), []).append((str(result.get("process")), r.created_at, late))
    return out


def pid_of(process: str) -> int:
    return int(process.split(":")[1])


@pytest.fixture
def three(
    data_dir: Path, fake_llm_server: FakeLlmServer, pg_url: str
) -> Iterator[tuple[ServedOpenCrab, ServedOpenCrab, ServedOpenCrab]]:
    env = {"OPENCRAB_DATABASE__URL": pg_url, "OPENCRAB_DATABASE__LEASE_TTL_SECS": "2"}
    Database(pg_url).upgrade()  # once, before three processes would each try
    processes = (
        ServedOpenCrab(data_dir / "a", llm=fake_llm_server, env=env),
        ServedOpenCrab(data_dir / "b", llm=fake_llm_server, env=env),
        ServedOpenCrab(
            data_dir / "w", llm=fake_llm_server, env=env, worker=True, args=("--refresh-secs", "1")
        ),
    )
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(ServedOpenCrab.start, processes))
        yield processes
    finally:
        for process in processes:
            process.stop()


def test_three_processes_share_a_hundred_agents_and_live_events(
    three: tuple[ServedOpenCrab, ServedOpenCrab, ServedOpenCrab],
    fake_llm_server: FakeLlmServer,
    pg_url: str,
) -> None:
    first, second, worker = three
    db = Database(pg_url)
    try:
        # fifty agents made through each server: each follows the ones it made, the worker
        # follows all of them (within a second)
        with ThreadPoolExecutor(6) as pool:
            made = pool.map(
                lambda job: make_agents(job[0].url, [job[1]], job[2]),
                [
                    (server, f"{server.port}-{n}", INTERVALS[n % len(INTERVALS)])
                    for server in (first, second)
                    for n in range(50)
                ],
            )
            ids = [agent for agents in made for agent in agents]
        on_first, on_second = ids[:50], ids[50:]
        intervals = {
            agent: INTERVALS[n % len(INTERVALS)]
            for agents in (on_first, on_second)
            for n, agent in enumerate(agents)
        }
        everyone = on_first + on_second
        assert len(everyone) == 100

        # a turn posted to the first server shows up on a WebSocket of the second
        fake_llm_server.reply(CHAT, Reply(json=completion({"content": "answered by the first"})))
        session = httpx.post(
            first.url + "/api/sessions", json={"agentId": on_first[0]}, timeout=30
        ).json()["id"]
        ws_url = second.url.replace("http://", "ws://") + "/api/ws"
        with connect(ws_url) as ws:
            ws.send(json.dumps({"type": "subscribe", "sessionId": session}))
            assert json.loads(ws.recv(30))["type"] == "subscribed"
            posted = httpx.post(
                f"{first.url}/api/sessions/{session}/messages", json={"content": "hi"}, timeout=60
            )
            assert posted.status_code == 201, posted.text
            seen: list[dict[str, object]] = []
            while not any(e["type"] == "message" for e in seen):
                message = json.loads(ws.recv(60))
                assert message["sessionId"] == session
                seen.append(message["event"])
        assert seen[0]["type"] == "user"
        assert seen[-1]["content"] == {"text": "answered by the first"}

        wait_for(
            "every agent to tick twice",
            lambda: all(len(ticks(db).get(a, [])) >= 2 for a in everyone),
        )
        before = ticks(db)
        holder: dict[str, int] = {}
        for agent in everyone:  # one process per agent: none ticked twice
            (holder[agent],) = {pid_of(p) for p, _, _ in before[agent]}
        # a server ticks the agents it made (it takes their leases as it makes them),
        # unless the worker, which follows every agent within a second, was first
        assert {holder[a] for a in on_first} <= {first.pid, worker.pid}
        assert {holder[a] for a in on_second} <= {second.pid, worker.pid}
        orphans = [a for a in everyone if holder[a] == first.pid]
        assert orphans  # the first holds agents: its crash has something to hand over

        first.kill()  # kill -9: its leases stay until they expire
        wait_for(
            "another process to tick the first server's agents",
            lambda: all(any(pid_of(p) != first.pid for p, _, _ in ticks(db)[a]) for a in orphans),
        )
        after = ticks(db)
        final: dict[str, int] = {}
        for agent in everyone:
            ticked = [pid_of(p) for p, _, _ in after[agent]]
            if agent in orphans:  # the first's ticks, then one heir's: never interleaved
                handover = next(n for n, pid in enumerate(ticked) if pid != first.pid)
                assert set(ticked[:handover]) == {first.pid}
                heir = ticked[handover]
                assert heir in (second.pid, worker.pid)
                assert set(ticked[handover:]) == {heir}, ticked
                final[agent] = heir
            else:
                assert set(ticked) == {holder[agent]}, ticked
                final[agent] = holder[agent]
            # within a process, ticks follow the agent's schedule: never two for one slot
            # (a tick's slot is when it ran less how late it was: load delays ticks)
            slots = [(p, t - timedelta(milliseconds=late)) for p, t, late in after[agent]]
            for (p1, t1), (p2, t2) in pairwise(slots):
                if p1 == p2:
                    assert (t2 - t1).total_seconds() > intervals[agent] / 2, after[agent]
        store = LeaseStore(db)
        owners = {pid_of(p): p for a in everyone for p, _, _ in after[a]}
        assert store.held_by(owners[first.pid]) == []  # all taken over
        for pid in (second.pid, worker.pid):  # each holds the leases of what it ticks
            held = store.held_by(owners[pid]) if pid in owners else []
            assert len(held) == sum(final[a] == pid for a in everyone)
    finally:
        db.close()
