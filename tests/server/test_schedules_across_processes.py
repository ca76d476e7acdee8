"""Schedules across real processes on one PostgreSQL database (issue 37, section 1):
two `opencrab up` and one `opencrab worker` run three schedules of 2-second intervals
for a minute — every slot is recorded once, in one process, none twice, none missed; and
`kill -9` of the process in the middle of a run records that run as abandoned while the
next slot runs in the process left."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.tables import schedule_runs, schedules
from tests.fakes.llm_server import FakeLlmServer, Recorded, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.served import ServedOpenCrab, wait_for

EVERY = 2
MINUTE_OF_SLOTS = 30  # each schedule's slots in a minute


def env_for(pg_url: str) -> dict[str, str]:
    return {
        "OPENCRAB_DATABASE__URL": pg_url,
        # a run's lease outlives a process stalled for a few seconds on this loaded machine
        # (a stall past the ttl would lose the run to another process, as it should);
        # kill -9 on this machine is seen at once whatever the ttl (store.lease_owners)
        "OPENCRAB_DATABASE__LEASE_TTL_SECS": "15",
        "OPENCRAB_SCHEDULES__MIN_INTERVAL_SECS": "1",
        "OPENCRAB_SCHEDULES__REFRESH_SECS": "0.5",
        "OPENCRAB_TICKETS__ENABLED": "false",
    }


def answer(request: Recorded) -> Reply:
    return Reply(json=completion({"content": "checked"}))


def all_runs(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(sa.select(schedule_runs).order_by(schedule_runs.c.slot)).all()
    return [row._asdict() for row in rows]


def anchors(db: Database) -> dict[str, datetime]:
    with db.read() as conn:
        rows = conn.execute(sa.select(schedules.c.id, schedules.c.anchor_at)).all()
    return {str(r.id): r.anchor_at for r in rows}


def pid_of(process: str) -> int:
    return int(process.split(":")[1])


def make_schedule(server: ServedOpenCrab, agent: str, prompt: str) -> str:
    made = httpx.post(
        f"{server.url}/api/agents/{agent}/schedules",
        json={"everySecs": EVERY, "action": {"kind": "turn", "prompt": prompt}},
        headers=server.headers,
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def make_agent(server: ServedOpenCrab) -> str:
    body = {"name": "aki", "prompt": "Terse.", "heartbeat": {"enabled": False}}
    made = httpx.post(server.url + "/api/agents", json=body, headers=server.headers, timeout=30)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


@pytest.fixture
def three(
    data_dir: Path, fake_llm_server: FakeLlmServer, pg_url: str
) -> Iterator[tuple[ServedOpenCrab, ServedOpenCrab, ServedOpenCrab]]:
    env = env_for(pg_url)
    Database(pg_url).upgrade()  # once, before three processes would each try
    processes = (
        ServedOpenCrab(data_dir / "a", llm=fake_llm_server, env=env),
        ServedOpenCrab(data_dir / "b", llm=fake_llm_server, env=env),
        ServedOpenCrab(data_dir / "w", llm=fake_llm_server, env=env, worker=True),
    )
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(ServedOpenCrab.start, processes))
        yield processes
    finally:
        for process in processes:
            process.stop()


def test_three_processes_run_every_slot_of_a_minute_once(
    three: tuple[ServedOpenCrab, ServedOpenCrab, ServedOpenCrab],
    fake_llm_server: FakeLlmServer,
    pg_url: str,
) -> None:
    first, second, worker = three
    fake_llm_server.respond(CHAT, answer)
    agent = make_agent(first)
    made = [make_schedule(first, agent, "one"), make_schedule(second, agent, "two")]
    made.append(make_schedule(first, agent, "three"))
    db = Database(pg_url)
    try:
        wait_for(
            "a minute of slots of every schedule",
            lambda: all(
                sum(r["schedule_id"] == s and r["ended_at"] is not None for r in all_runs(db))
                >= MINUTE_OF_SLOTS
                for s in made
            ),
            secs=180,
        )
        stopped_at = datetime.now(UTC)
        for process in three:
            process.stop()
        found = all_runs(db)
        starts = anchors(db)
    finally:
        db.close()
    pids = {first.pid, second.pid, worker.pid}
    ran_in: set[int] = set()
    for schedule_id in made:
        mine = [r for r in found if r["schedule_id"] == schedule_id]
        slots = [r["slot"] for r in mine]
        assert len(slots) == len(set(slots))  # no slot twice
        # every slot from the first to the last before the stop, none missed
        due = int((stopped_at - starts[schedule_id]).total_seconds() // EVERY) - 1
        expected = [starts[schedule_id] + timedelta(seconds=EVERY * n) for n in range(1, due + 1)]
        assert slots[: len(expected)] == expected, (schedule_id, slots)
        for run in mine[: len(expected)]:
            assert run["status"] in ("succeeded", "skipped"), (run, pids)
            if run["status"] == "skipped":  # a slot that came while its run still went on
                assert run["detail"] == "the previous run was still going", run
            assert pid_of(run["process"]) in pids
            ran_in.add(pid_of(run["process"]))
        succeeded = [r for r in mine if r["status"] == "succeeded"]
        assert len(succeeded) >= MINUTE_OF_SLOTS * 0.8, [r["status"] for r in mine]
    assert len(ran_in) >= 2  # the work was shared, not one process's
    assert len(fake_llm_server.requests_to(CHAT)) == sum(
        r["status"] in ("succeeded", "failed") and r["session_id"] is not None for r in found
    )


def test_a_process_killed_mid_run_leaves_the_run_abandoned_and_the_next_slot_runs(
    data_dir: Path, fake_llm_server: FakeLlmServer, pg_url: str
) -> None:
    env = env_for(pg_url)
    Database(pg_url).upgrade()
    gate, calls = threading.Event(), []

    def held_first(request: Recorded) -> Reply:
        calls.append(request)
        if len(calls) == 1:  # the first run's model call never answers
            return Reply(gate=gate, json=completion({"content": "too late"}))
        return answer(request)

    fake_llm_server.respond(CHAT, held_first)
    up = ServedOpenCrab(data_dir / "a", llm=fake_llm_server, env=env)
    worker = ServedOpenCrab(data_dir / "w", llm=fake_llm_server, env=env, worker=True)
    db = Database(pg_url)
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(ServedOpenCrab.start, (up, worker)))
        schedule_id = make_schedule(up, make_agent(up), "check")
        wait_for(
            "the first run, held at the model",
            lambda: bool(calls) and any(r["status"] == "running" for r in all_runs(db)),
        )
        (held,) = [r for r in all_runs(db) if r["status"] == "running"]
        by_pid = {up.pid: up, worker.pid: worker}
        victim = by_pid[pid_of(held["process"])]
        survivor = worker if victim is up else up
        victim.kill()  # SIGKILL: no shutdown code runs
        killed_at = datetime.now(UTC)
        wait_for(
            "the held run abandoned and a later slot run by the other process",
            lambda: (
                any(r["id"] == held["id"] and r["status"] == "abandoned" for r in all_runs(db))
                and any(
                    r["slot"] > held["slot"]
                    and r["status"] == "succeeded"
                    and pid_of(r["process"]) == survivor.pid
                    for r in all_runs(db)
                )
            ),
            secs=120,
        )
        found = all_runs(db)
        gone = next(r for r in found if r["id"] == held["id"])
        assert "abandoned" in gone["detail"]
        assert gone["ended_at"] >= killed_at - timedelta(seconds=1)
        slots = [r["slot"] for r in found if r["schedule_id"] == schedule_id]
        assert len(slots) == len(set(slots))
        failed = (
            httpx.get(
                survivor.url + "/api/schedule-runs/failed", headers=survivor.headers, timeout=30
            )
            if not survivor.worker
            else None
        )
        if failed is not None:
            assert held["id"] in [r["id"] for r in failed.json()]
    finally:
        gate.set()
        db.close()
        up.stop()
        worker.stop()
