"""Several `opencrab worker` processes on one PostgreSQL share the tickets: every ticket is
run, by exactly one of them (one session each, one model call each)."""

from __future__ import annotations

from pathlib import Path

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.core.sessions import list_sessions
from opencrab.store import Database
from opencrab.tickets import service
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.served import ServedOpenCrab
from tests.tickets.conftest import openai_tool_reply, wait_for

CHAT = "/v1/chat/completions"
TICKETS = 12


def test_workers_on_postgresql_run_each_ticket_once(
    pg_url: str, settings: Settings, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    db = Database(pg_url)
    db.upgrade()
    try:
        agent = AgentStore(db, settings).create(
            AgentCreate(name="aki", prompt="Work.", heartbeat=HeartbeatConfig(enabled=False))
        )
        fake_llm_server.reply(
            CHAT, Reply(json=openai_tool_reply(("complete_ticket", {"summary": "done"})))
        )
        env = {"OPENCRAB_DATABASE__URL": pg_url, "OPENCRAB_TICKETS__POLL_SECS": "0.1"}
        workers = [
            ServedOpenCrab(data_dir / f"w{i}", llm=fake_llm_server, env=env, worker=True)
            for i in range(3)
        ]
        try:
            for worker in workers:
                worker.start()
            made = [service.create_ticket(db, agent.id).id for _ in range(TICKETS)]
            wait_for(
                "every ticket to complete",
                lambda: all(t.status == "completed" for t in service.list_tickets(db)),
                secs=120,
            )
        finally:
            for worker in workers:
                worker.stop()
        for ticket_id in made:
            assert len(list_sessions(db, ticket_id=ticket_id)) == 1
        assert len(fake_llm_server.requests_to(CHAT)) == TICKETS
    finally:
        db.close()
