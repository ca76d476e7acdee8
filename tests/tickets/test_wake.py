"""A ticket starts when it becomes runnable, not at the scheduler's next poll: with the
poll at 60 s, a created ticket runs, a person's answer continues it and a reset runs it
again, each at once — in process (the commit's signal, on SQLite and PostgreSQL) and in
an `opencrab worker` process on PostgreSQL (LISTEN/NOTIFY)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.leases import LeaseStore, ticket_key
from opencrab.tickets import service
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.served import ServedOpenCrab
from tests.server.local import LocalClient
from tests.tickets.conftest import calls, openai_tool_reply, wait_for
from tests.tickets.test_end_to_end import END, create

SLOW_POLL = "60"  # longer than any wait below: only a wake-up starts a ticket in time
WAIT_SECS = 30  # generous under load, still half the poll


@pytest.fixture
def slow_api(
    settings: Settings,
    any_db: Database,
    scripted: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[TestClient]:
    monkeypatch.setenv("OPENCRAB_TICKETS__POLL_SECS", SLOW_POLL)
    slow = load_settings()
    assert slow.tickets.poll_secs == float(SLOW_POLL)
    router = LlmRouter(slow)
    router.register_provider(scripted)
    app = create_app(slow, any_db, router=router, tickets=True)
    with LocalClient(app) as client:
        yield client


def reached(api: TestClient, ticket_id: str, status: str) -> dict[str, Any]:
    return dict(
        wait_for(
            f"ticket {ticket_id} to be {status}",
            lambda: (t := api.get(f"/api/tickets/{ticket_id}").json())["status"] == status and t,
            secs=WAIT_SECS,
        )
    )


def test_create_answer_and_reset_wake_the_scheduler(
    slow_api: TestClient, scripted: ScriptedProvider
) -> None:
    made = slow_api.post("/api/agents", json={"name": "aki", "prompt": "Work on tickets."})
    assert made.status_code == 201, made.text
    agent = made.json()
    scripted.then(
        calls(("ask_human", {"question": "Which branch?"})),
        calls(("complete_ticket", {"summary": "Done on main."})),
        calls(("complete_ticket", {"summary": "Done again."})),
        END,
    )
    ticket_id = create(slow_api, agent, context={"goal": "Merge"})
    asked = reached(slow_api, ticket_id, "suspended")  # created: started at once
    current = asked["currentSessionId"]
    answer = slow_api.post(f"/api/sessions/{current}/messages", json={"content": "main"})
    assert answer.status_code == 201, answer.text
    done = reached(slow_api, ticket_id, "completed")  # answered: continued at once
    assert done["currentSessionId"] == current
    assert slow_api.patch(f"/api/tickets/{ticket_id}/reset").status_code == 200
    again = reached(slow_api, ticket_id, "completed")  # reset: run again at once
    assert again["currentSessionId"] != current
    assert len(scripted.requests) == 3


def test_a_ticket_made_elsewhere_wakes_a_worker_on_postgresql(
    pg_url: str, settings: Settings, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    db = Database(pg_url)
    db.upgrade()
    try:
        agent = AgentStore(db, settings).create(
            AgentCreate(name="aki", prompt="Work.", heartbeat=HeartbeatConfig(enabled=False))
        )
        fake_llm_server.reply(
            "/v1/chat/completions",
            Reply(json=openai_tool_reply(("complete_ticket", {"summary": "done"}))),
        )
        env = {"OPENCRAB_DATABASE__URL": pg_url, "OPENCRAB_TICKETS__POLL_SECS": SLOW_POLL}
        worker = ServedOpenCrab(data_dir / "w", llm=fake_llm_server, env=env, worker=True)
        worker.start()
        try:
            # the first ticket may be found by the worker's first look; once its run has
            # ended and let go of its lease, the worker has looked again and waits for
            # its poll: the second, made here in another process, only reaches it in
            # time through its NOTIFY
            first = service.create_ticket(db, agent.id).id
            wait_for(
                "the first ticket to complete and its lease to go",
                lambda: (
                    service.get_ticket(db, first).status == "completed"
                    and not LeaseStore(db).live([ticket_key(first)])
                ),
                secs=WAIT_SECS,
            )
            second = service.create_ticket(db, agent.id).id
            wait_for(
                "the second ticket to complete",
                lambda: service.get_ticket(db, second).status == "completed",
                secs=WAIT_SECS,
            )
        finally:
            worker.stop()
    finally:
        db.close()
