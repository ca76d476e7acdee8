"""Every turn holds its session, whichever gateway starts it; a connection's turns are capped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.slow_provider import OverlappingProvider
from tests.server.conftest import new_agent
from tests.server.local import LocalClient


def one_chain(events: list[dict[str, Any]]) -> None:
    """Every event's parent is the event before it: one chain, no fork."""
    parent = None
    for event in events:
        assert event["parent_id"] == parent, f"the chain forks at {event['type']} {event['id']}"
        parent = event["id"]


def test_rest_and_v1_turns_on_one_session_keep_one_event_chain(
    settings: Settings, db: Database
) -> None:
    settings = settings.model_copy(deep=True)
    settings.gateway.openai_compat.enabled = True
    slow = OverlappingProvider("openai", "noted")
    router = LlmRouter(settings)
    router.register_provider(slow)
    with LocalClient(create_app(settings, db, router=router)) as client:
        agent_id = new_agent(client)["id"]
        session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]

        def rest(n: int) -> Any:
            return client.post(f"/api/sessions/{session_id}/messages", json={"content": f"r{n}"})

        def v1(n: int, stream: bool) -> Any:
            body = {"model": "aki", "messages": [{"role": "user", "content": f"v{n}"}]}
            return client.post(
                "/v1/chat/completions",
                json={**body, "stream": stream},
                headers={"X-OpenCrab-Session": session_id},
            )

        with ThreadPoolExecutor(4) as pool:
            answers = [
                pool.submit(rest, 1),
                pool.submit(v1, 1, False),
                pool.submit(rest, 2),
                pool.submit(v1, 2, True),
            ]
            statuses = [a.result(timeout=60).status_code for a in answers]
        assert statuses == [201, 200, 201, 200]
        events = client.get(f"/api/traces/{session_id}/events").json()
    assert [e["type"] for e in events].count("user") == 4
    assert [e["type"] for e in events].count("message") == 4
    assert [e["type"] for e in events].count("token_usage") == 4
    one_chain(events)
    assert slow.most_in_flight == 1  # the turns took the session one at a time


@pytest.fixture
def held(settings: Settings, db: Database) -> Iterator[tuple[TestClient, threading.Event]]:
    """An app allowing two turns per WebSocket, whose model answers once the event is set."""
    settings = settings.model_copy(deep=True)
    settings.gateway.rest.ws_max_turns_per_connection = 2
    scripted = ScriptedProvider("openai", "done")
    scripted.hold = threading.Event()
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as client:
        try:
            yield client, scripted.hold
        finally:
            scripted.hold.set()  # never leave a worker thread waiting


def test_a_websocket_runs_a_bounded_number_of_turns_at_once(
    held: tuple[TestClient, threading.Event],
) -> None:
    client, gate = held
    new_agent(client, name="mina")
    with client.websocket_connect("/api/ws") as ws:
        for n in range(5):  # each in a new session: only the connection's cap applies
            ws.send_json({"type": "chat", "agent": "mina", "content": "hi", "requestId": f"r{n}"})
        # each turn either starts (and waits for the model) or is refused at once
        first = [ws.receive_json() for _ in range(5)]
        started = {m["requestId"] for m in first if m["type"] == "chat.started"}
        refused = [m for m in first if m["type"] != "chat.started"]
        assert started == {"r0", "r1"}
        assert [m["type"] for m in refused] == ["error"] * 3
        assert {m["requestId"] for m in refused} == {"r2", "r3", "r4"}
        assert {m["error"] for m in refused} == {"too_many_turns"}
        assert "2 turns at once" in refused[0]["message"]
        assert "ws_max_turns_per_connection" in refused[0]["message"]
        gate.set()
        done: dict[str, Any] = {}
        while len(done) < 2:
            message = ws.receive_json()
            assert message["type"] != "error", message
            if message["type"] == "chat.done":
                done[message["requestId"]] = message
        assert set(done) == {"r0", "r1"}
        assert {m["reply"] for m in done.values()} == {"done"}
        # with those finished, the connection may start turns again
        ws.send_json({"type": "chat", "agent": "mina", "content": "again", "requestId": "r5"})
        while (message := ws.receive_json())["type"] != "chat.done":
            assert message["type"] != "error", message
        assert message["requestId"] == "r5"


def test_an_empty_model_reply_is_recorded_as_an_error(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    scripted.then("  \n")
    turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": "hi"})
    assert turn.status_code == 201, turn.text
    outcome = turn.json()["turn"]
    assert outcome["reply"] is None
    assert outcome["stoppedBy"] == "empty_reply"
    assert "empty reply" in outcome["error"]
    messages = client.get(f"/api/sessions/{session_id}/messages").json()
    assert [m["role"] for m in messages] == ["user"]  # no blank assistant message
    events = client.get(f"/api/traces/{session_id}/events").json()
    last = [e for e in events if e["type"] == "message"][-1]
    assert last["metadata"]["error"] == "empty_reply"
    assert last["metadata"]["kind"] == "error"
    usage = [e for e in events if e["type"] == "token_usage"]
    assert [u["parent_id"] for u in usage] == [last["id"]]  # the call's usage is kept
