"""Tickets completed per second by 1, 2 and 4 `opencrab worker` processes on PostgreSQL.

Each leg gets a fresh database on one PostgreSQL server (OPENCRAB_TEST_PG_URL when set,
otherwise a throwaway cluster started like the tests', tests/fakes/postgres.py), one
agent, and N worker processes (`opencrab worker`, real subprocesses, each with its
ticket scheduler: `[tickets] concurrency` tickets at once, looking for work every
`--poll-secs`). Once every worker is up, the tickets are inserted at once, all
`pending`; the clock runs until the last one is `completed`. The model is the fake
OpenAI server (tests/fakes/llm_server.py) answering every call at once with a
`complete_ticket` tool call, so each ticket is one turn: claim by lease, a new session,
the turn with its recorded steps, the ticket's move.

Prints each leg's tickets per second, the ratio to one worker in the same run, and checks
that every ticket ran exactly once (one session each). The workers, the PostgreSQL
server and the fake model share this machine's CPUs: the ratio says how far more
processes help on it, not on a machine with a core per process.

    python bench/tickets.py [--tickets N] [--poll-secs S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.postgres import ENV_URL, postgres_server
from tests.fakes.served import ServedOpenCrab

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.store import Database
from opencrab.store.repositories import tickets as tickets_repo
from opencrab.store.tables import sessions, tickets

CHAT = "/v1/chat/completions"
WORKERS = (1, 2, 4)


def complete_at_once() -> Reply:
    """The fake model's one reply: complete the ticket."""
    arguments = json.dumps({"summary": "done"})
    return Reply(
        json={
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
    )


def count(db: Database, table: sa.Table, *where: sa.ColumnElement[bool]) -> int:
    with db.read() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()
        )


def leg(url: str, workers: int, n: int, llm: FakeLlmServer, poll_secs: float) -> float:
    """Tickets per second with `workers` processes on the database at `url`."""
    home = Path(tempfile.mkdtemp(prefix="opencrab-bench-tickets-"))
    settings = load_settings(env={"OPENCRAB_HOME": str(home), "OPENCRAB_DATABASE__URL": url})
    db = Database(url)
    db.upgrade()
    agent = AgentStore(db, settings).create(
        AgentCreate(name="bench", prompt="Work.", heartbeat=HeartbeatConfig(enabled=False))
    )
    env = {
        "OPENCRAB_DATABASE__URL": url,
        "OPENCRAB_TICKETS__POLL_SECS": str(poll_secs),
        "OPENCRAB_AGENT__HEARTBEAT_INTERVAL_SECS": "3600",
    }
    running = [
        ServedOpenCrab(home / f"w{i}", llm=llm, env=env, worker=True) for i in range(workers)
    ]
    try:
        for worker in running:
            worker.start()
        started = time.perf_counter()
        with db.write() as conn:
            for _ in range(n):
                tickets_repo.insert_ticket(conn, agent.id, {}, {"goal": "bench"})
        done = 0
        while done < n:
            time.sleep(0.02)
            done = count(db, tickets, tickets.c.status == "completed")
            stuck = [w for w in running if w.returncode is not None]
            if stuck:
                raise RuntimeError(f"a worker ended early:\n{stuck[0].output()}")
        elapsed = time.perf_counter() - started
        ran = count(db, sessions, sessions.c.kind == "ticket")
        if ran != n:
            raise RuntimeError(f"{n} tickets ran in {ran} sessions: some ran more than once")
    finally:
        for worker in running:
            worker.stop()
        db.close()
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=200, help="tickets per leg")
    parser.add_argument("--poll-secs", type=float, default=0.1, help="[tickets] poll_secs")
    args = parser.parse_args()
    pg_url = os.environ.get(ENV_URL)
    for name in list(os.environ):  # a developer's own settings do not leak into the workers
        if name.startswith("OPENCRAB_"):
            del os.environ[name]
    with FakeLlmServer() as llm, postgres_server(pg_url) as server:
        llm.reply(CHAT, complete_at_once())
        rates: dict[int, float] = {}
        for workers in WORKERS:
            url = server.create_database()
            try:
                rates[workers] = leg(url, workers, args.tickets, llm, args.poll_secs)
            finally:
                server.drop_database(url)
            ratio = rates[workers] / rates[WORKERS[0]]
            print(
                f"{workers} worker{'s' if workers > 1 else ' '}: "
                f"{rates[workers]:7.1f} tickets/s  (x{ratio:.2f} of 1 worker)",
                flush=True,
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"({args.tickets} tickets per leg, each run exactly once; {os.cpu_count()} CPUs, "
        f"load average {load}: other work on the machine shares them)"
    )


if __name__ == "__main__":
    main()
