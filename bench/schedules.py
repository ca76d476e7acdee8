"""Schedules: what 10,000 of them cost one idle process, how late due runs start, and
three processes on PostgreSQL running every slot once.

1. Idle cost. One process (a Runtime on SQLite, as `opencrab up` opens it) holding
   10,000 schedules that are not due during the measure (daily cron expressions in
   several time zones, daily intervals): the CPU it uses over `--idle-secs`, as a share
   of one core, beside the same Runtime without the schedules' scheduler (the baseline,
   measured in the same run just before).
2. Lateness. With those 10,000 loaded, `--due` more schedules every 2 s, their slots
   spread over the interval (their action creates a ticket: a write, no model call),
   run for `--due-secs`: how long after its
   slot each run started (p50, p99, max), beside what a 1-second poll (the ticket
   scheduler's default) would give for the same slots.
3. Three processes. Three `opencrab worker` subprocesses on one fresh PostgreSQL
   database (OPENCRAB_TEST_PG_URL, or a throwaway cluster like the tests') run `--pg`
   schedules every 2 s for `--pg-secs`: double runs (one slot recorded twice: the
   table's unique key makes it impossible, counted anyway) and missed slots (a slot
   between the first and the stop with no run), and the lateness across the three.

    python bench/schedules.py [--idle-secs 20] [--due 20] [--due-secs 20] [--pg 20] [--pg-secs 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.postgres import ENV_URL, postgres_server
from tests.fakes.served import ServedOpenCrab

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.core.runtime import Runtime
from opencrab.schedules.scheduler import ScheduleScheduler
from opencrab.schedules.spec import checked, parse_input
from opencrab.store import Database
from opencrab.store.repositories import schedules as repo
from opencrab.store.tables import schedule_runs, schedules

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
EVERY = 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def insert(db: Database, agent_id: str, bodies: list[dict[str, object]], now: datetime) -> None:
    """Store schedules in one transaction (the bench's set-up, not what it measures)."""
    with db.write() as conn:
        for body in bodies:
            values = checked(parse_input(body), now, min_interval_secs=1)
            repo.insert_schedule(
                conn,
                {
                    **values,
                    "agent_id": agent_id,
                    "created_by": "bench",
                    "paused": False,
                    "created_at": now,
                    "updated_at": now,
                },
            )


def idle_bodies(n: int) -> list[dict[str, object]]:
    """`n` schedules none of which comes due soon (1 January; daily intervals)."""
    bodies: list[dict[str, object]] = []
    for i in range(n):
        action = {"kind": "turn", "prompt": f"report {i}"}
        if i % 2:
            bodies.append({"everySecs": 86_400, "action": action})
        else:
            zone = ZONES[i % len(ZONES)]
            bodies.append({"cron": f"{i % 60} {i % 24} 1 1 *", "timezone": zone, "action": action})
    return bodies


async def cpu_share(secs: float) -> float:
    """This process's CPU over `secs` of waiting, as a share of one core."""
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.sleep(secs)
    return (time.process_time() - cpu) / (time.monotonic() - wall)


async def one_process(idle: int, idle_secs: float, due: int, due_secs: float) -> None:
    home = Path(tempfile.mkdtemp(prefix="opencrab-bench-schedules-"))
    os.environ["OPENCRAB_HOME"] = str(home)
    os.environ["OPENCRAB_SCHEDULES__MIN_INTERVAL_SECS"] = "1"
    os.environ["OPENCRAB_TICKETS__ENABLED"] = "false"
    settings = load_settings()
    async with Runtime.open(settings) as runtime:
        agent = AgentStore(runtime.db, settings).create(
            AgentCreate(name="bench", prompt="Terse.", heartbeat=HeartbeatConfig(enabled=False))
        )
        now = datetime.now(UTC)
        insert(runtime.db, agent.id, idle_bodies(idle), now)
        await asyncio.sleep(1)
        baseline = await cpu_share(idle_secs)
        scheduler = ScheduleScheduler(runtime)
        loading = time.perf_counter()
        await scheduler.refresh()
        loaded_in = time.perf_counter() - loading
        scheduler.start()
        await asyncio.sleep(1)
        with_schedules = await cpu_share(idle_secs)
        print(
            f"idle, {idle:,} schedules: {with_schedules * 100:.2f} % of a core; "
            f"the same process without the scheduler: {baseline * 100:.2f} %; "
            f"the schedules' own: {(with_schedules - baseline) * 100:+.2f} % "
            f"(loading them took {loaded_in:.2f} s)",
            flush=True,
        )
        ticket = {"kind": "ticket", "template": {"context": {"goal": "bench"}}}
        start = datetime.now(UTC)
        for i in range(due):  # their slots spread over the interval, as schedules made apart
            spread = start + timedelta(seconds=EVERY * i / due)
            insert(runtime.db, agent.id, [{"everySecs": EVERY, "action": ticket}], spread)
        scheduler.changed()
        await asyncio.sleep(due_secs)
        await scheduler.stop()
        late = list(scheduler.lateness_secs)
        print(
            f"due runs ({due} schedules every {EVERY} s, {len(late)} runs, beside the {idle:,}): "
            f"started p50 {percentile(late, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(late, 0.99) * 1000:.0f} ms, max {max(late, default=0) * 1000:.0f} ms "
            "after their slot; a 1 s poll starts a run 0-1 s after its slot, evenly "
            "(p50 500 ms, p99 990 ms)",
            flush=True,
        )


def three_processes(n: int, secs: float) -> None:
    for name in list(os.environ):  # a developer's own settings do not leak into the workers
        if name.startswith("OPENCRAB_"):
            del os.environ[name]
    env = {
        "OPENCRAB_SCHEDULES__MIN_INTERVAL_SECS": "1",
        "OPENCRAB_SCHEDULES__REFRESH_SECS": "0.5",
        "OPENCRAB_TICKETS__ENABLED": "false",
        "OPENCRAB_DATABASE__LEASE_TTL_SECS": "15",  # a run outlives a stall of a loaded machine
    }
    home = Path(tempfile.mkdtemp(prefix="opencrab-bench-schedules-pg-"))
    with FakeLlmServer() as llm, postgres_server(os.environ.get(ENV_URL)) as server:
        url = server.create_database()
        db = Database(url)
        db.upgrade()
        workers = [
            ServedOpenCrab(
                home / f"w{i}", llm=llm, env={**env, "OPENCRAB_DATABASE__URL": url}, worker=True
            )
            for i in range(3)
        ]
        try:
            with ThreadPoolExecutor(3) as pool:
                list(pool.map(ServedOpenCrab.start, workers))
            os.environ["OPENCRAB_HOME"] = str(home / "setup")
            settings = load_settings()
            agent = AgentStore(db, settings).create(
                AgentCreate(name="bench", prompt="Terse.", heartbeat=HeartbeatConfig(enabled=False))
            )
            ticket = {"kind": "ticket", "template": {"context": {"goal": "bench"}}}
            # the first slots a few seconds on: every worker has its schedules running
            start = datetime.now(UTC) + timedelta(seconds=8)
            for i in range(n):
                spread = start + timedelta(seconds=EVERY * i / n)
                insert(db, agent.id, [{"everySecs": EVERY, "action": ticket}], spread)
            time.sleep(secs + 8)
            stopped = datetime.now(UTC)
            for worker in workers:
                worker.stop()
            with db.read() as conn:
                runs = conn.execute(
                    sa.select(
                        schedule_runs.c.schedule_id,
                        schedule_runs.c.slot,
                        schedule_runs.c.started_at,
                        schedule_runs.c.process,
                        schedule_runs.c.status,
                    )
                ).all()
                anchors = dict(conn.execute(sa.select(schedules.c.id, schedules.c.anchor_at)).all())
        finally:
            for worker in workers:
                worker.stop()
            db.close()
            server.drop_database(url)
    seen: dict[tuple[str, datetime], int] = {}
    for r in runs:
        seen[(r.schedule_id, r.slot)] = seen.get((r.schedule_id, r.slot), 0) + 1
    doubles = sum(count - 1 for count in seen.values())
    missed = 0
    expected = 0
    missing_at: dict[int, int] = {}
    for schedule_id, anchor in anchors.items():
        due = int((stopped - timedelta(seconds=EVERY) - anchor).total_seconds() // EVERY)
        for k in range(1, due + 1):
            expected += 1
            if (schedule_id, anchor + timedelta(seconds=EVERY * k)) not in seen:
                missed += 1
                missing_at[k] = missing_at.get(k, 0) + 1
    before = [r for r in runs if r.slot <= stopped]  # the workers' shutdown left out
    late = [(r.started_at - r.slot).total_seconds() for r in before]
    by_process: dict[str, int] = {}
    for r in before:
        by_process[r.process] = by_process.get(r.process, 0) + 1
    statuses: dict[str, int] = {}
    for r in before:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    print(
        f"three workers on PostgreSQL, {n} schedules every {EVERY} s for {secs:.0f} s: "
        f"{len(before)} runs of {expected} slots due, {doubles} double runs, {missed} missed "
        f"slots; started p50 {percentile(late, 0.5) * 1000:.0f} ms, p99 "
        f"{percentile(late, 0.99) * 1000:.0f} ms after their slot; runs per process "
        f"{sorted(by_process.values())}; outcomes {statuses}"
        + (f"; missed slots by number {dict(sorted(missing_at.items()))}" if missed else ""),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=10_000, help="schedules not due")
    parser.add_argument("--idle-secs", type=float, default=20.0)
    parser.add_argument("--due", type=int, default=20, help="schedules every 2 s")
    parser.add_argument("--due-secs", type=float, default=20.0)
    parser.add_argument("--pg", type=int, default=20, help="schedules on PostgreSQL")
    parser.add_argument("--pg-secs", type=float, default=60.0)
    args = parser.parse_args()
    asyncio.run(one_process(args.idle, args.idle_secs, args.due, args.due_secs))
    three_processes(args.pg, args.pg_secs)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"({os.cpu_count()} CPUs, load average {load}: other work on the machine shares them)")


if __name__ == "__main__":
    main()
