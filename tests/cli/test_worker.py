"""`opencrab worker` as a user runs it: no HTTP, ticks the agents' heartbeats by lease,
follows agents created after it started, and SIGTERM stops it cleanly (exit 0, every
lease let go of)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.store import Database
from opencrab.store.leases import LeaseStore, heartbeat_key
from opencrab.store.tables import heartbeat_log
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab


def wait_for(what: str, done: Callable[[], bool], secs: float = 90) -> None:
    deadline = time.monotonic() + secs
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def ticked_by(db: Database, agent_id: str) -> list[str]:
    with db.read() as conn:
        rows = conn.execute(
            sa.select(heartbeat_log.c.result_json)
            .where(heartbeat_log.c.agent_id == agent_id)
            .order_by(heartbeat_log.c.id)
        ).scalars()
        return [str((r or {}).get("process")) for r in rows]


def test_a_worker_ticks_agents_made_after_it_started_and_stops_on_sigterm(
    data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    data = data_dir / "shared"
    env = {"OPENCRAB_DATABASE__LEASE_TTL_SECS": "3"}
    worker = ServedOpenCrab(
        data, llm=fake_llm_server, env=env, worker=True, args=("--refresh-secs", "0.5")
    ).start()
    try:
        settings = load_settings(overrides={"data_dir": str(data)})
        db = Database(settings.database_url)
        agent = AgentStore(db, settings).create(
            AgentCreate(name="late", heartbeat=HeartbeatConfig(interval_secs=2))
        )
        wait_for(
            "the worker to tick the new agent twice", lambda: len(ticked_by(db, agent.id)) >= 2
        )
        (owner,) = set(ticked_by(db, agent.id))
        assert owner.split(":")[1] == str(worker.pid)  # this very worker process
        lease = LeaseStore(db).get(heartbeat_key(agent.id))
        assert lease is not None
        assert lease.owner == owner
        assert "Uvicorn" not in worker.output()  # no HTTP server in a worker
    finally:
        worker.stop()
    assert worker.returncode == 0, worker.output()
    assert LeaseStore(db).held_by(owner) == []  # let go of at once, not left to expire
    db.close()
