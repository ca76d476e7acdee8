"""Crash recovery (issue 20 §4): `kill -9` of the process running a ticket, on SQLite and
on PostgreSQL, with real `opencrab up` / `opencrab worker` processes and the fake OpenAI
server holding a reply (or a request the agent makes) at a gate while the kill happens.

Once the dead process's lease expires, another process continues the ticket from its
last durable step; a call that may have changed something outside (here an
http_request POST) that was in flight is not run again: the ticket waits for a person
with the call shown, and goes on once they answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from opencrab.actions.base import default_registry
from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.core.sessions import session_messages
from opencrab.core.tools import sync_tools, tool_id
from opencrab.store import Database
from opencrab.tickets import service
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.served import ServedOpenCrab
from tests.tickets.conftest import openai_tool_reply, wait_for

CHAT = "/v1/chat/completions"
HOOK = "/hook"


@pytest.fixture
def db(store_url: str) -> Iterator[Database]:
    database = Database(store_url)
    database.upgrade()
    sync_tools(database, default_registry())
    yield database
    database.close()


@pytest.fixture
def env(store_url: str, settings: Settings) -> dict[str, str]:
    """The processes' settings: this store, short leases, a quick scheduler, and the fake
    server's loopback address allowed to http_request."""
    found = {
        "OPENCRAB_DATABASE__LEASE_TTL_SECS": "2",
        "OPENCRAB_TICKETS__POLL_SECS": "0.2",
        "OPENCRAB_TOOLS__HTTP_ALLOW_NETWORKS": '["127.0.0.1/32"]',
    }
    if store_url != settings.database_url:
        found["OPENCRAB_DATABASE__URL"] = store_url
    return found


def agent(db: Database, settings: Settings, *, http: bool = False) -> str:
    created = AgentStore(db, settings).create(
        AgentCreate(
            name="aki",
            prompt="Work on tickets.",
            heartbeat=HeartbeatConfig(enabled=False),
            tool_ids=[tool_id("http_request")] if http else None,
        )
    )
    if http:
        save_tool_settings(db, created.id, ToolSettings(http_request=True))
    return created.id


def step_titles(db: Database, ticket_id: str) -> list[str]:
    return [step.title for step in service.get_ticket(db, ticket_id).steps]


def status(db: Database, ticket_id: str) -> str:
    return service.get_ticket(db, ticket_id).status


def test_a_ticket_killed_mid_step_continues_in_another_process(
    db: Database,
    settings: Settings,
    env: dict[str, str],
    data_dir: Path,
    fake_llm_server: FakeLlmServer,
) -> None:
    llm, gate = fake_llm_server, threading.Event()
    llm.reply(
        CHAT,
        Reply(json=openai_tool_reply(("add_step", {"title": "Collect the logs"}))),
        Reply(gate=gate, json=openai_tool_reply(("complete_ticket", {"summary": "never sent"}))),
        Reply(json=openai_tool_reply(("complete_ticket", {"summary": "Done after the crash."}))),
    )
    ticket = service.create_ticket(db, agent(db, settings), context={"goal": "Find the bug"})
    first = ServedOpenCrab(data_dir, llm=llm, env=env).start()  # `opencrab up`
    try:
        wait_for("the second model call, held", lambda: len(llm.requests_to(CHAT)) == 2)
        assert step_titles(db, ticket.id) == ["Collect the logs"]  # durable before the kill
        first.kill()
        with ServedOpenCrab(data_dir, llm=llm, env=env, worker=True) as second:
            wait_for(
                "the worker to finish the ticket", lambda: status(db, ticket.id) == "completed"
            )
            owner = second.pid
    finally:
        gate.set()
        first.stop()
    done = service.get_ticket(db, ticket.id)
    assert [s.title for s in done.steps] == ["Collect the logs"]  # not recorded twice
    (session,) = {done.current_session_id}  # the same session, continued
    said = [m.content for m in session_messages(db, str(session))]
    assert said[-1] == "Done after the crash."
    third = llm.requests_to(CHAT)[2].json
    history = json.dumps(third["messages"])
    assert "Collect the logs" in history  # its last durable step is in the history
    assert owner != first.pid


def test_a_call_in_flight_that_changes_the_world_is_not_run_again(
    db: Database,
    settings: Settings,
    env: dict[str, str],
    data_dir: Path,
    fake_llm_server: FakeLlmServer,
) -> None:
    llm, gate = fake_llm_server, threading.Event()
    post = {"url": llm.url + HOOK, "method": "POST", "body": "deploy v2"}
    llm.reply(
        CHAT,
        Reply(json=openai_tool_reply(("add_step", {"title": "Deploy"}))),
        Reply(json=openai_tool_reply(("http_request", post))),
        Reply(json=openai_tool_reply(("complete_ticket", {"summary": "Deployed once."}))),
    )
    llm.reply(HOOK, Reply(gate=gate, json={"deployed": True}))
    ticket = service.create_ticket(db, agent(db, settings, http=True), context={"goal": "Deploy"})
    first = ServedOpenCrab(data_dir, llm=llm, env=env, worker=True).start()
    try:
        wait_for("the POST to reach the hook", lambda: len(llm.requests_to(HOOK)) == 1)
        first.kill()
        gate.set()  # the request the dead process made ends; nobody reads its answer
        with ServedOpenCrab(data_dir, llm=llm, env=env, worker=True):
            wait_for(
                "the ticket to wait for a person", lambda: status(db, ticket.id) == "suspended"
            )
            waiting = service.get_ticket(db, ticket.id)
            assert waiting.error_message == "interrupted in flight: http_request"
            assert [s.title for s in waiting.steps] == ["Deploy"]
            session = str(waiting.current_session_id)
            shown = session_messages(db, session)[-1]
            assert shown.role == "assistant"  # the board shows it as the question
            assert "http_request" in shown.content
            assert '"method": "POST"' in shown.content
            assert len(llm.requests_to(CHAT)) == 2  # no turn ran meanwhile

            service.answer_ticket_session(db, session, "It went through. Finish up.")
            wait_for("the ticket to complete", lambda: status(db, ticket.id) == "completed")
    finally:
        gate.set()
        first.stop()
    assert len(llm.requests_to(HOOK)) == 1  # the POST was never sent again
    third = json.dumps(llm.requests_to(CHAT)[2].json["messages"])
    assert "it was not run again" in third  # the model was told what happened to its call
    assert "It went through. Finish up." in third
    assert service.get_ticket(db, ticket.id).error_message is None
