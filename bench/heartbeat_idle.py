"""CPU cost of heartbeats for 10,000 idle agents on one event loop (zero LLM calls), and
of the same agents shared by three processes on PostgreSQL (target: under 2% of a core).

Real agents in a real SQLite store, each on a prime interval (29–43 s) with its first
tick spread over one interval. The scheduler makes the cheap checks (budget, discussions,
new logs) with a few grouped queries per second and writes every tick to heartbeat_log.
The baseline, in the same process and for the same wall time, is the naive design: one
asyncio task per agent that sleeps its interval and runs its own checks queries.

Prints CPU time as a share of one core for both, the ticks made, LLM calls (must be 0),
and the ratio naive / scheduler.

`--processes 3` then runs the agents on PostgreSQL (`--pg-url`, else a throwaway cluster
from the machine's PostgreSQL binaries): first one scheduler alone (the baseline), then
three processes each wanting every agent's heartbeat lease (store.lease_keeper: each
holds its fair share). Prints each process's CPU as a share of a core and against the
baseline, its ticks, the agents that moved between processes while the shares settled,
and the double ticks (an agent's slot ticked twice, by one process or two: must be 0).

    python bench/heartbeat_idle.py [--agents N] [--secs S] [--processes 3 [--pg-url URL]]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from uuid import UUID, uuid4

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opencrab.config import load_settings
from opencrab.core.heartbeat import AgentPulse, HeartbeatScheduler, Tick
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore
from opencrab.store.tables import (
    agent_sessions,
    agents,
    heartbeat_log,
    llm_usage_metrics,
    memory_sessions,
)

PRIMES = (29, 31, 37, 41, 43)


def interval_of(agent_id: str) -> int:
    """An agent's interval, the same in every process."""
    return PRIMES[UUID(agent_id).int % len(PRIMES)]


async def scheduler_run(
    db: Database, ids: list[str], secs: float, *, leases: LeaseKeeper | None = None
) -> tuple[float, int, int]:
    calls = 0

    async def act(tick: Tick) -> None:
        nonlocal calls
        calls += 1

    scheduler = HeartbeatScheduler(db, act=act, leases=leases)
    if leases is not None:
        leases.start()
    for agent_id in ids:  # first ticks at each agent's slot, spread over its interval
        scheduler.add(AgentPulse(agent_id, interval_of(agent_id)))
    stop = asyncio.Event()
    cpu = time.process_time()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(secs)
    stop.set()
    await task
    if leases is not None:
        await leases.close()
    return time.process_time() - cpu, scheduler.ticks, calls


async def naive_run(db: Database, ids: list[str], secs: float) -> tuple[float, int]:
    ticks = 0
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)

    async def agent_loop(agent_id: str, interval: float, first: float) -> None:
        nonlocal ticks
        await asyncio.sleep(first)
        while True:
            with db.read() as conn:
                conn.execute(
                    sa.select(sa.func.sum(llm_usage_metrics.c.estimated_cost_usd)).where(
                        llm_usage_metrics.c.agent_id == agent_id,
                        llm_usage_metrics.c.timestamp >= midnight,
                    )
                ).scalar()
                conn.execute(
                    sa.select(agent_sessions).where(agent_sessions.c.agent_id == agent_id)
                ).all()
                conn.execute(
                    sa.select(sa.func.max(memory_sessions.c.id)).where(
                        memory_sessions.c.agent_id == agent_id
                    )
                ).scalar()
            with db.write() as conn:
                conn.execute(
                    heartbeat_log.insert().values(
                        agent_id=agent_id, decision="idle", created_at=datetime.now(UTC)
                    )
                )
            ticks += 1
            await asyncio.sleep(interval)

    rng = random.Random(1)
    cpu = time.process_time()
    tasks = []
    for agent_id in ids:
        interval = rng.choice(PRIMES)
        tasks.append(asyncio.create_task(agent_loop(agent_id, interval, rng.uniform(0, interval))))
    await asyncio.sleep(secs)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return time.process_time() - cpu, ticks


def make_agents(db: Database, count: int) -> list[str]:
    now = datetime.now(UTC)
    ids = [str(uuid4()) for _ in range(count)]
    with db.write() as conn:
        conn.execute(
            agents.insert(),
            [
                {"id": i, "name": f"agent-{n}", "prompt": "", "created_at": now, "updated_at": now}
                for n, i in enumerate(ids)
            ],
        )
    return ids


async def main(count: int, secs: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENCRAB_HOME"] = tmp
        settings = load_settings()
        db = Database(settings.database_url)
        db.upgrade()
        ids = make_agents(db, count)
        ours, ticks, calls = await scheduler_run(db, ids, secs)
        naive, naive_ticks = await naive_run(db, ids, secs)
        with db.read() as conn:
            logged = conn.execute(sa.select(sa.func.count()).select_from(heartbeat_log)).scalar()
        db.close()
    print(f"{count} idle agents for {secs:.0f} s of wall time")
    print(
        f"scheduler: {ticks} ticks, {calls} LLM calls, CPU {ours:.3f} s = "
        f"{100 * ours / secs:.2f}% of a core"
    )
    print(
        f"naive (a task per agent): {naive_ticks} ticks, CPU {naive:.3f} s = "
        f"{100 * naive / secs:.2f}% of a core"
    )
    print(f"heartbeat_log rows written: {logged}")
    print(f"ratio naive/scheduler CPU: {naive / ours:.2f}x")


def child(url: str, secs: float) -> None:
    """One of the processes sharing the agents: its CPU and ticks, as JSON on stdout."""
    db = Database(url)
    with db.read() as conn:
        ids = [str(i) for i in conn.execute(sa.select(agents.c.id)).scalars()]
    keeper = LeaseKeeper(LeaseStore(db), ttl_secs=30)
    cpu, ticks, calls = asyncio.run(scheduler_run(db, ids, secs, leases=keeper))
    db.close()
    print(json.dumps({"cpu": cpu, "ticks": ticks, "calls": calls}))


def shared(url: str, count: int, secs: float, processes: int) -> None:
    db = Database(url)
    db.upgrade()
    with db.write() as conn:
        conn.execute(heartbeat_log.delete())
        conn.execute(agents.delete())
    ids = make_agents(db, count)
    alone, alone_ticks, _ = asyncio.run(scheduler_run(db, ids, secs))  # the baseline
    with db.write() as conn:
        conn.execute(heartbeat_log.delete())
    script = str(Path(__file__).resolve())
    children = [
        subprocess.Popen(
            [sys.executable, script, "--child", url, "--secs", str(secs)], stdout=subprocess.PIPE
        )
        for _ in range(processes)
    ]
    results = [json.loads(c.communicate()[0]) for c in children]
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                heartbeat_log.c.agent_id, heartbeat_log.c.result_json, heartbeat_log.c.created_at
            )
        )
        by_agent: dict[str, list[tuple[float, str]]] = {}
        for row in rows:  # (its slot: when it ticked less how late, the process)
            slot = row.created_at.timestamp() - row.result_json.get("late_ms", 0) / 1000
            by_agent.setdefault(str(row.agent_id), []).append((slot, row.result_json["process"]))
    db.close()
    doubles = moved = 0
    for agent_id, ticked in by_agent.items():
        ticked.sort()
        moved += len({process for _, process in ticked}) > 1
        doubles += sum(b - a < 0.9 * interval_of(agent_id) for (a, _), (b, _) in pairwise(ticked))
    print(f"PostgreSQL, {count} idle agents for {secs:.0f} s of wall time")
    print(
        f"baseline, one process without leases: {alone_ticks} ticks, "
        f"CPU {100 * alone / secs:.2f}% of a core"
    )
    for n, r in enumerate(results, 1):
        print(
            f"process {n} of {processes} (leases): {r['ticks']} ticks, {r['calls']} LLM calls, "
            f"CPU {100 * r['cpu'] / secs:.2f}% of a core = {r['cpu'] / alone:.2f}x the baseline"
        )
    total = sum(r["ticks"] for r in results)
    print(f"ticks in all processes: {total} ({total / alone_ticks:.2f}x the baseline's)")
    print(f"agents that moved between processes (the fair share settling): {moved}")
    print(f"slots ticked twice (double ticks, by any processes): {doubles}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--secs", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--pg-url")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.secs)
    elif args.processes:
        with contextlib.ExitStack() as stack:
            url = args.pg_url
            if url is None:
                from tests.fakes.postgres import postgres_server

                url = stack.enter_context(postgres_server(None)).create_database()
            shared(url, args.agents, args.secs, args.processes)
    else:
        asyncio.run(main(args.agents, args.secs))
