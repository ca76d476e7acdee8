"""Tickets: how soon one starts, how many one process runs at once, how far workers scale.

Every leg gets a fresh database on one PostgreSQL server (OPENCRAB_TEST_PG_URL when set,
otherwise a throwaway cluster started like the tests', tests/fakes/postgres.py), or a
SQLite file, one agent, and real `opencrab up` / `opencrab worker` subprocesses
(tests/fakes/served.py). The model is the fake OpenAI server (tests/fakes/llm_server.py)
answering every call with a `complete_ticket` tool call, so each ticket is one turn:
claim by lease, a new session, the turn with its recorded steps, the ticket's move.

1. Start latency: from `POST /api/tickets` to the agent's first model request (the fake
   model notes when each arrives, in this process's clock), one ticket at a time, on
   PostgreSQL and on SQLite, `[tickets] poll_secs` at its default of 1 s: p50 and p99.
   The baseline, same run: tickets written straight into the table with no signal (as a
   program that is not OpenCrab would), which only the poll finds.
2. Concurrency: one `opencrab worker`, the model answering after 200 ms; tickets/s at
   `[tickets] concurrency` 1 and at 32, the ratio, and the most model requests in flight
   at once (target: >= 20 at once, >= 15x the throughput of one at a time), on
   PostgreSQL and on SQLite (the default store; its worker finds the tickets this
   process inserts by its poll, at SQLITE_POLL_SECS for both legs).
3. Processes: one and two workers on PostgreSQL, the model answering after 200 ms, each
   worker at concurrency 2, so the model and not the CPU is the limit (a worker's
   ceiling is 2 / 0.2 s = 10 tickets/s): tickets/s and the ratio (target: >= 1.5x).
4. The earlier measure: 1, 2 and 4 workers with an instant model (the CPU is the limit),
   with the CPU seconds the workers spent per ticket and what one idle worker spends.

Parts 2-4 time each leg twice on the same workers, which are first started and settled
(every one's ticket scheduler LISTENs, and their CPU has come down to idle): "from cold",
a first batch of tickets, in which each worker pays for its first model call; and
"warm", the next batch — the figure compared with its target. Every leg checks that
every ticket ran exactly once (one session each).

Why more workers made it slower before (1 / 2 / 4 workers: 15.9 / 16.6 / 9.9 tickets/s;
found 2 December 2026 with py-spy, /proc CPU counters and pg_stat_activity samples):

- The workers were timed from cold, and starting is most of a worker's CPU: a worker
  counted as started when it printed its banner (tests/fakes/served.py), which comes
  BEFORE its runtime opens and its services start (imports, the stores, the tool
  sources, one pass of every loop): about 2.4 CPU seconds per worker, and its first
  model call then imports the OpenAI SDK and its types (about 1 s more). The tickets
  were inserted at once, so with 4 workers some 10-14 CPU seconds of starting fell
  inside a leg of 10-20 s on a machine of 2 cores: the more workers, the more of the
  leg went to starting. Part 3 shows it: warm, two workers give about 2x one worker;
  from cold, less than one.
- The "idle" worker's 128-148 ms of CPU per second was the same thing: measured 1-6 s
  after the banner, it was the worker still starting. Settled, an idle worker spends
  about 10 ms of CPU per second (part 4 prints both): each second its ticket poll (one
  read of two SELECTs), the schedules' change check (one SELECT) and the approval
  follow-ups' due check (one SELECT); every 10 s (lease ttl / 3) its lease pass and the
  looks for discussions and agent-mode sessions nobody holds; every 5 s the agents
  re-read for heartbeats (`--refresh-secs`, four SELECTs) and the agent-mode list; every
  few seconds the dashboard's MCP servers' revisions (one SELECT). About 11 statements
  a second in all, each documented interval kept; nothing there is worth a user-visible
  change (a longer poll would delay a dead process's tickets and SQLite's cross-process
  wake-ups).
- Claims were one lease transaction per ticket, tried one after another by one claiming
  loop: with more tickets than that loop could claim per second, it capped a process
  (about 10 model requests in flight at concurrency 32); and every worker woken by the
  same NOTIFY read the same runnable list and tried the same tickets, each lost claim a
  write for nothing. Now a claim takes as many leases as there is room for in one
  transaction (a lost one leaves its room to the next batch).
- Every turn's step adds its calls to the same daily rollup rows (one per day, agent,
  model) and held their row locks for the rest of the step's transaction (its messages,
  the ticket's move): 20+ concurrent tickets queued on them (on average 1.5-1.9
  PostgreSQL backends waiting on that lock, sampled from pg_stat_activity). The rollups
  are now written last in the step's transaction, and nothing waits on them.

What limited part 2 was CPU: a warm ticket cost a worker 23-33 ms of its own CPU. On
SQLite most of it was thread hops (each store call a trip to a worker thread and back,
~100 µs of CPU, some 17 of them a ticket, and a convoy when a thread holding the write
lock waited for the interpreter) and SQLAlchemy building Core statements (leases, the
ticket's reads and moves, a rollup). `Database.run` now writes on the event loop when the
lock is free, and those statements are prepared once: 6-9 ms a ticket. On PostgreSQL each
statement is still a round trip from a worker thread, and the server shares the 2 cores:
22-30 ms a ticket, and x8-9 at concurrency 32.

Measured 2 December 2026, later (`python bench/tickets.py --tickets 200 --starts 100`,
load 1.1-1.5): start p50 / p99 23.5 / 31.1 ms on PostgreSQL, 8.2 / 13.9 ms on SQLite;
concurrency 32 vs 1 on SQLite 72.9 vs 4.6 tickets/s (x16.0, 6.0 ms of worker CPU a
ticket; x19.7 at --tickets 300), on PostgreSQL 39.1 vs 4.3 (x9.1, 22.6 ms); two workers vs
one on PostgreSQL x1.96; instant model, 1 / 2 / 4 workers: 36.8 / 68.5 / 57.7 tickets/s.

Measured earlier that day (`python bench/tickets.py --tickets 200 --starts 100`, 2 cores,
load average 12-15 from other work): start p50 / p99 46.7 / 216.3 ms on PostgreSQL and
25.3 / 99.9 ms on SQLite (the poll alone: ~1,015-1,060 / 1,140-1,300 ms; at load ~4 the
same day, 32.4 / 47.9 and 19.7 / 34.7 ms); concurrency 32 vs 1: 18.4 vs 4.1 tickets/s
(x4.5), 23 model requests in flight at most (about 10 before the batched claims); two
workers vs one with the 200 ms model, warm: 10.0 vs 4.5 tickets/s (x2.19; from cold
x1.34); instant model, warm, 1 / 2 / 4 workers: 25.0 / 37.1 / 22.0 tickets/s at 25.0 /
27.2 / 35.8 ms of worker CPU per ticket (from cold: 6.5 / 5.8 / 2.4, 56.5 / 90.0 / 112.3
ms); starting 2.2-2.5 CPU s per worker; an idle worker 13 ms of CPU per second once
started (28 at a 0.1 s poll), 132-152 ms/s in the 5 s after its banner.

    python bench/tickets.py [--tickets N] [--poll-secs S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa
from tests.fakes.llm_server import FakeLlmServer, Recorded, Reply
from tests.fakes.postgres import ENV_URL, PostgresServer, postgres_server
from tests.fakes.served import ServedOpenCrab

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.store import Database
from opencrab.store.repositories import tickets as tickets_repo
from opencrab.store.tables import leases, sessions, tickets
from opencrab.store.types import utcnow

CHAT = "/v1/chat/completions"
WORKERS = (1, 2, 4)
MODEL_SECS = 0.2
WIDE = 32  # concurrency of the wide leg of part 2
SQLITE_POLL_SECS = 0.1  # part 2 on SQLite: how soon a worker finds the inserted tickets
PER_WORKER = 2  # concurrency of each worker in part 3: the model, not the CPU, limits
WARM_UP = 3  # tickets run before part 1's timing


def complete_at_once() -> dict[str, object]:
    """The fake model's one reply: complete the ticket."""
    arguments = json.dumps({"summary": "done"})
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "complete_ticket", "arguments": arguments},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class Model:
    """The fake model's replies, after `delay` seconds, noting when each request came."""

    def __init__(self, llm: FakeLlmServer) -> None:
        self.llm = llm
        self.delay = 0.0
        self.arrivals: list[float] = []
        self.arrived = threading.Event()
        self.body = complete_at_once()
        llm.respond(CHAT, self._answer)

    def _answer(self, _: Recorded) -> Reply:
        self.arrivals.append(time.perf_counter())
        self.arrived.set()
        return Reply(json=self.body, delay=self.delay)

    def reset(self, delay: float) -> None:
        self.delay = delay
        self.arrivals = []
        self.arrived.clear()
        self.llm.requests.clear()

    def most_in_flight(self) -> int:
        """The most requests held at once (each is held `delay` seconds after it came)."""
        times = sorted(self.arrivals)
        most, first = 0, 0
        for last, at in enumerate(times):
            while times[first] <= at - self.delay:
                first += 1
            most = max(most, last - first + 1)
        return most


def count(db: Database, table: sa.Table, *where: sa.ColumnElement[bool]) -> int:
    with db.read() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()
        )


def cpu_secs(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def store(pg: PostgresServer | None) -> Iterator[tuple[str, Path]]:
    """A fresh database (PostgreSQL, or SQLite when `pg` is None) and a home folder."""
    home = Path(tempfile.mkdtemp(prefix="opencrab-bench-tickets-"))
    url = pg.create_database() if pg is not None else f"sqlite:///{home / 'opencrab.db'}"
    try:
        yield url, home
    finally:
        if pg is not None:
            pg.drop_database(url)


def agent_in(url: str, home: Path) -> tuple[Database, str]:
    settings = load_settings(env={"OPENCRAB_HOME": str(home), "OPENCRAB_DATABASE__URL": url})
    db = Database(url)
    db.upgrade()
    agent = AgentStore(db, settings).create(
        AgentCreate(name="bench", prompt="Work.", heartbeat=HeartbeatConfig(enabled=False))
    )
    return db, agent.id


def env_for(url: str, **tickets: object) -> dict[str, str]:
    env = {
        "OPENCRAB_DATABASE__URL": url,
        "OPENCRAB_AGENT__HEARTBEAT_INTERVAL_SECS": "3600",
    }
    env.update({f"OPENCRAB_TICKETS__{k.upper()}": str(v) for k, v in tickets.items()})
    return env


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


# ------------------------------------------------------------------ 1. start latency
def start_latency(pg: PostgresServer | None, model: Model, n: int) -> tuple[list[float], ...]:
    """Seconds from POST /api/tickets to the model request, and from a bare insert."""
    model.reset(0.0)
    with store(pg) as (url, home):
        db, agent_id = agent_in(url, home)
        served = ServedOpenCrab(home / "up", llm=model.llm, env=env_for(url))
        served.start()
        try:
            with served.client() as client:
                for _ in range(WARM_UP):  # the first turns load code and connect
                    _one(db, model, lambda: _post(client, agent_id))
                posted = [_one(db, model, lambda: _post(client, agent_id)) for _ in range(n)]
                bare = [
                    _one(db, model, lambda: _insert_quietly(db, agent_id)) for _ in range(n // 5)
                ]
        finally:
            served.stop()
            db.close()
    return posted, bare


def _one(db: Database, model: Model, make: object) -> float:
    """Seconds from `make()` (a new ticket) to its model request, the server idle before:
    the previous ticket has completed, and its run has let go of its lease."""
    model.arrived.clear()
    before = len(model.arrivals)
    finished = count(db, tickets, tickets.c.status == "completed")
    started = time.perf_counter()
    make()  # type: ignore[operator]
    if not model.arrived.wait(30):
        raise RuntimeError("no model request within 30 s of the ticket")
    took = model.arrivals[before] - started
    deadline = time.monotonic() + 30
    held = leases.c.key.like("ticket:%")
    done = tickets.c.status == "completed"
    while count(db, tickets, done) <= finished or count(db, leases, held):
        if time.monotonic() > deadline:
            raise RuntimeError("the ticket did not complete within 30 s")
        time.sleep(0.005)
    return took


def _post(client: object, agent_id: str) -> None:
    response = client.post("/api/tickets", json={"agentId": agent_id})  # type: ignore[attr-defined]
    if response.status_code != 201:
        raise RuntimeError(f"POST /api/tickets: {response.status_code} {response.text}")


def _insert_quietly(db: Database, agent_id: str) -> None:
    """A pending ticket written without the signal OpenCrab's own writes send."""
    now = utcnow()
    with db.write() as conn:
        conn.execute(
            tickets.insert().values(
                id=str(__import__("uuid").uuid4()),
                agent_id=agent_id,
                status="pending",
                params={},
                context={"goal": "bench"},
                error_message=None,
                created_at=now,
                updated_at=now,
            )
        )


# ------------------------------------------------------------------ 2-4. throughput
def listening(db: Database) -> int:
    """How many processes LISTEN for new tickets on this PostgreSQL database: a worker's
    ticket scheduler has started once its LISTEN connection is there."""
    with db.read() as conn:
        return int(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND query = 'LISTEN opencrab_tickets'"
                )
            ).scalar_one()
        )


def settle(pids: list[int], quiet_ms_per_s: float = 60.0, most_secs: float = 20.0) -> None:
    """Wait until the processes spend less than `quiet_ms_per_s` of CPU per second (their
    start is over: imports, the services after the scheduler); `most_secs` at most."""
    deadline = time.monotonic() + most_secs
    while time.monotonic() < deadline:
        before = [cpu_secs(pid) for pid in pids]
        time.sleep(0.5)
        spent = max(cpu_secs(pid) - b for pid, b in zip(pids, before, strict=True))
        if spent * 2000 < quiet_ms_per_s:
            return


@dataclass
class Run:
    """A throughput leg: tickets/s and the workers' CPU seconds per ticket, from cold
    (the workers' first tickets: each imports the model's SDK on its first call) and
    warm (the same workers, the next batch); and their CPU spent starting."""

    cold: float
    cold_cpu: float
    warm: float
    warm_cpu: float
    start_cpu: float  # CPU seconds per worker from its launch until it settled idle


def throughput(
    pg: PostgresServer | None, model: Model, workers: int, n: int, **tickets_env: object
) -> Run:
    """Tickets per second with `workers` worker processes, started and settled first (on
    SQLite, `pg` None, one worker: nothing LISTENs there, the settling is the wait)."""
    with store(pg) as (url, home):
        db, agent_id = agent_in(url, home)
        env = env_for(url, **tickets_env)
        running = [
            ServedOpenCrab(home / f"w{i}", llm=model.llm, env=env, worker=True)
            for i in range(workers)
        ]
        try:
            for worker in running:
                worker.start()
            deadline = time.monotonic() + 120
            while pg is not None and listening(db) < workers:  # every scheduler started
                if time.monotonic() > deadline:
                    raise RuntimeError("the workers' ticket schedulers did not start")
                time.sleep(0.05)
            pids = [w.pid for w in running]
            settle(pids)
            start_cpu = sum(cpu_secs(pid) for pid in pids) / workers
            cold = _batch(db, agent_id, running, max(20, 10 * workers), done_before=0)
            model.arrivals.clear()
            warm = _batch(db, agent_id, running, n, done_before=max(20, 10 * workers))
            total = max(20, 10 * workers) + n
            ran = count(db, sessions, sessions.c.kind == "ticket")
            if ran != total:
                raise RuntimeError(f"{total} tickets ran in {ran} sessions: some ran twice")
        finally:
            for worker in running:
                worker.stop()
            db.close()
    return Run(cold[0], cold[1], warm[0], warm[1], start_cpu)


def _batch(
    db: Database, agent_id: str, running: list[ServedOpenCrab], n: int, *, done_before: int
) -> tuple[float, float]:
    """Insert `n` tickets at once; tickets/s until all completed, and CPU s per ticket."""
    cpu_before = sum(cpu_secs(w.pid) for w in running)
    started = time.perf_counter()
    with db.write() as conn:
        for _ in range(n):
            tickets_repo.insert_ticket(conn, agent_id, {}, {"goal": "bench"})
    done = done_before
    while done < done_before + n:
        time.sleep(0.02)
        done = count(db, tickets, tickets.c.status == "completed")
        stuck = [w for w in running if w.returncode is not None]
        if stuck:
            raise RuntimeError(f"a worker ended early:\n{stuck[0].output()}")
    elapsed = time.perf_counter() - started
    cpu = sum(cpu_secs(w.pid) for w in running) - cpu_before
    return n / elapsed, cpu / n


def idle_cpu(pg: PostgresServer, model: Model, poll_secs: float) -> tuple[float, float]:
    """CPU seconds per second one worker with nothing to do spends: in the 5 s after it
    says it started (what the earlier bench measured: its services still starting), and
    over 10 s once it settled."""
    with store(pg) as (url, home):
        db, _ = agent_in(url, home)
        worker = ServedOpenCrab(
            home / "idle", llm=model.llm, env=env_for(url, poll_secs=poll_secs), worker=True
        )
        worker.start()
        try:
            before = cpu_secs(worker.pid)
            time.sleep(5.0)
            starting = (cpu_secs(worker.pid) - before) / 5.0
            settle([worker.pid])
            before = cpu_secs(worker.pid)
            time.sleep(10.0)
            return starting, (cpu_secs(worker.pid) - before) / 10.0
        finally:
            worker.stop()
            db.close()


def _print_workers(runs: dict[int, Run], target: str) -> None:
    """Each worker count's warm tickets/s beside one worker's, with the cold figures."""
    one = runs[min(runs)]
    for workers, run in runs.items():
        plural = "s" if workers > 1 else " "
        print(
            f"   {workers} worker{plural}: {run.warm:6.1f} tickets/s (x{run.warm / one.warm:.2f} "
            f"of 1 worker; {target}), CPU {run.warm_cpu * 1000:5.1f} ms/ticket  | from cold "
            f"(each worker's first tickets): {run.cold:6.1f} tickets/s "
            f"(x{run.cold / one.cold:.2f}), CPU {run.cold_cpu * 1000:5.1f} ms/ticket; "
            f"starting took {run.start_cpu:.2f} CPU s per worker",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=200, help="tickets per throughput leg")
    parser.add_argument("--starts", type=int, default=50, help="tickets timed in part 1")
    parser.add_argument(
        "--poll-secs", type=float, default=1.0, help="[tickets] poll_secs in part 4"
    )
    parser.add_argument("--parts", default="1234", help="which parts to run, e.g. 2 or 13")
    args = parser.parse_args()
    pg_url = os.environ.get(ENV_URL)
    for name in list(os.environ):  # a developer's own settings do not leak into the workers
        if name.startswith("OPENCRAB_"):
            del os.environ[name]
    with FakeLlmServer() as llm, postgres_server(pg_url) as pg:
        model = Model(llm)

        if "1" in args.parts:
            print("1. POST /api/tickets -> the agent's first model request ([tickets] poll 1 s)")
        for name, server in (("PostgreSQL", pg), ("SQLite", None)) if "1" in args.parts else ():
            posted, bare = start_latency(server, model, args.starts)
            print(
                f"   {name:10}: p50 {pct(posted, 0.5) * 1000:6.1f} ms  "
                f"p99 {pct(posted, 0.99) * 1000:6.1f} ms  (target p99 <= 100 ms)  | "
                f"found by the poll only (no signal): p50 {pct(bare, 0.5) * 1000:6.1f} ms  "
                f"p99 {pct(bare, 0.99) * 1000:6.1f} ms  (x{pct(bare, 0.5) / pct(posted, 0.5):.0f})",
                flush=True,
            )

        if "2" in args.parts:
            print(f"2. one worker, model answering after {MODEL_SECS * 1000:.0f} ms (warm)")
            for name, server in (("PostgreSQL", pg), ("SQLite", None)):
                # SQLite: a ticket inserted by this process wakes no worker; their poll finds it
                poll = {"poll_secs": SQLITE_POLL_SECS} if server is None else {}
                model.reset(MODEL_SECS)
                serial = throughput(server, model, 1, 20, concurrency=1, **poll)
                model.reset(MODEL_SECS)
                wide = throughput(server, model, 1, args.tickets, concurrency=WIDE, **poll)
                print(
                    f"   {name:10} concurrency 1 : {serial.warm:6.1f} tickets/s  (worker CPU "
                    f"{serial.warm_cpu * 1000:.1f} ms/ticket)\n"
                    f"   {name:10} concurrency {WIDE}: {wide.warm:6.1f} tickets/s  "
                    f"(x{wide.warm / serial.warm:.1f} of one at a time; target >= x15; worker CPU "
                    f"{wide.warm_cpu * 1000:.1f} ms/ticket), at most {model.most_in_flight()} "
                    "model requests in flight at once (target >= 20)",
                    flush=True,
                )

        if "3" in args.parts:
            print(f"3. workers on PostgreSQL, concurrency {PER_WORKER} each, model {MODEL_SECS}s")
            runs: dict[int, Run] = {}
            for workers in (1, 2):
                model.reset(MODEL_SECS)
                runs[workers] = throughput(pg, model, workers, args.tickets, concurrency=PER_WORKER)
            _print_workers(runs, "target >= x1.5")

        if "4" not in args.parts:
            return
        print(f"4. instant model (CPU is the limit), [tickets] poll {args.poll_secs} s")
        runs = {}
        for workers in WORKERS:
            model.reset(0.0)
            runs[workers] = throughput(pg, model, workers, args.tickets, poll_secs=args.poll_secs)
        _print_workers(runs, "no target: 2 cores")
        for poll in sorted({args.poll_secs, 0.1}):
            starting, idle = idle_cpu(pg, model, poll)
            print(
                f"   one worker with nothing to do, poll {poll} s: {idle * 1000:.0f} ms of CPU "
                f"per second once started  | in the 5 s after it says it started (its "
                f"services still starting; what was measured before): {starting * 1000:.0f} ms/s"
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"({args.tickets} tickets per throughput leg, each run exactly once; "
        f"{os.cpu_count()} CPUs, load average {load}: other work on the machine shares them)"
    )


if __name__ == "__main__":
    main()
