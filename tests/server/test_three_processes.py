"""Three real processes on one PostgreSQL database — two `opencrab up` and one `opencrab
worker` — share 100 agents' heartbeats by lease, fairly (at most 34 each): every slot of
every agent is ticked once, in one process, none twice; after `kill -9` of a server its
agents tick on in the two others (fifty each) once their leases expire; and a WebSocket
on one server sees a turn posted to the other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from websockets.sync.client import connect

from opencrab.store import Database
from opencrab.store.tables import heartbeat_log, leases
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


def shares(db: Database) -> dict[int, int]:
    """How many agents' heartbeat leases each process (by pid) holds now."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(leases.c.owner, sa.func.count())
            .where(leases.c.key.startswith("heartbeat:"), leases.c.expires_at > sa.func.now())
            .group_by(leases.c.owner)
        ).all()
    return {pid_of(owner): int(n) for owner, n in rows}


def held_by_pid(db: Database, pid: int) -> list[str]:
    """The agents whose heartbeat lease the process `pid` holds now."""
    with db.read() as conn:
        keys = conn.execute(
            sa.select(leases.c.key, leases.c.owner).where(leases.c.key.startswith("heartbeat:"))
        ).all()
    return [key.removeprefix("heartbeat:") for key, owner in keys if pid_of(owner) == pid]


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
                lambda job: make_agents(job[0], [job[1]], job[2]),
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
            first.url + "/api/sessions",
            json={"agentId": on_first[0]},
            headers=first.headers,
            timeout=30,
        ).json()["id"]
        ws_url = second.url.replace("http://", "ws://") + "/api/ws"
        with connect(ws_url, additional_headers=second.headers) as ws:
            ws.send(json.dumps({"type": "subscribe", "sessionId": session}))
            assert json.loads(ws.recv(30))["type"] == "subscribed"
            posted = httpx.post(
                f"{first.url}/api/sessions/{session}/messages",
                json={"content": "hi"},
                headers=first.headers,
                timeout=60,
            )
            assert posted.status_code == 201, posted.text
            seen: list[dict[str, object]] = []
            while not any(e["type"] == "message" for e in seen):
                message = json.loads(ws.recv(60))
                assert message["sessionId"] == session
                seen.append(message["event"])
        assert seen[0]["type"] == "user"
        assert seen[-1]["content"] == {"text": "answered by the first"}

        # the three share the hundred agents fairly (at most ceil(100 / 3) each) and each
        # agent ticks in one of them at a time
        wait_for(
            "every agent to tick twice, the agents shared among the three",
            lambda: (
                all(len(ticks(db).get(a, [])) >= 2 for a in everyone)
                and sum(shares(db).values()) == 100
                and max(shares(db).values()) <= 34
            ),
        )
        assert set(shares(db)) == {first.pid, second.pid, worker.pid}
        on_the_first = held_by_pid(db, first.pid)
        first.kill()  # kill -9: its leases stay until they expire
        killed = datetime.now(UTC)
        wait_for(
            "the two left to share the first server's agents, fifty each",
            lambda: shares(db) == {second.pid: 50, worker.pid: 50},
        )
        wait_for(
            "another process to tick each of the first server's agents",
            lambda: all(
                any(pid_of(p) != first.pid and t > killed for p, t, _ in ticks(db)[a])
                for a in on_the_first
            ),
        )
        after = ticks(db)
        for agent in everyone:
            ticked = [pid_of(p) for p, _, _ in after[agent]]
            assert set(ticked) <= {first.pid, second.pid, worker.pid}
            if agent in on_the_first:  # none of its ticks after its death
                assert all(pid_of(p) != first.pid for p, t, _ in after[agent] if t > killed)
            # every slot ticked once, whichever process held the agent: all processes
            # put an agent on the same slots (its ticks are whole intervals apart)
            slots = sorted(t - timedelta(milliseconds=late) for _, t, late in after[agent])
            for t1, t2 in pairwise(slots):
                assert (t2 - t1).total_seconds() > intervals[agent] * 0.9, after[agent]
        moved = [a for a in everyone if len({p for p, _, _ in after[a]}) > 1]
        assert set(on_the_first) <= set(moved)
    finally:
        db.close()
