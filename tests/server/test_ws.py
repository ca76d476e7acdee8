"""The WebSocket gateway in-process: live session events, chat, errors, auth, slow clients."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from opencrab.auth import TokenStore
from opencrab.config import Settings
from opencrab.core.tools import tool_id
from opencrab.event_log import EventLog
from opencrab.events import parse_event
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatRequest, ChatResponse
from opencrab.server import live
from opencrab.server.app import create_app
from opencrab.server.live import Client, EventHub
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.event_chain import chain
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.sockets import ping_until_closed
from tests.server.conftest import new_agent
from tests.server.local import LocalClient


class GatedProvider(ScriptedProvider):
    """Holds its answer to request number `hold_at` until the test opens the gate."""

    def __init__(self, name: str, hold_at: int) -> None:
        super().__init__(name)
        self.hold_at = hold_at
        self.gate = threading.Event()

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        if len(self.requests) + 1 == self.hold_at:
            await asyncio.to_thread(self.gate.wait, 30)
        return await super().chat_completion(request)


def receive_until(ws: Any, wanted: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """Messages up to and including the first of type `wanted`."""
    seen: list[dict[str, Any]] = []
    for _ in range(limit):
        message = ws.receive_json()
        seen.append(message)
        if message["type"] == wanted:
            return seen
    raise AssertionError(f"no {wanted!r} in {seen}")


def test_a_sessions_events_arrive_while_a_rest_message_is_processed(
    settings: Settings, db: Database
) -> None:
    gated = GatedProvider("openai", hold_at=2)
    gated.then(calls(("ws_write", {"path": "plan.md", "content": "water"})), speak("Done."))
    router = LlmRouter(settings)
    router.register_provider(gated)
    with LocalClient(create_app(settings, db, router=router)) as client:
        agent_id = new_agent(client)["id"]
        session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
        with client.websocket_connect("/api/ws") as ws, ThreadPoolExecutor(1) as pool:
            ws.send_json({"type": "subscribe", "sessionId": session_id})
            assert ws.receive_json()["type"] == "subscribed"
            posted = pool.submit(
                client.post, f"/api/sessions/{session_id}/messages", json={"content": "Plan"}
            )
            live_events = []
            while len(live_events) < 4:  # user, tool_call, token_usage, tool_result
                message = ws.receive_json()
                assert message["type"] == "event"
                assert message["sessionId"] == session_id
                live_events.append(parse_event(json.dumps(message["event"])))
            assert not posted.done()  # the model is still thinking about its next step
            assert [e.type for e in live_events] == [
                "user",
                "tool_call",
                "token_usage",
                "tool_result",
            ]
            assert live_events[0].content.text == "Plan"  # type: ignore[union-attr]
            gated.gate.set()
            assert posted.result(timeout=30).status_code == 201
            stored = client.get(f"/api/traces/{session_id}/events").json()
            rest = [ws.receive_json()["event"] for _ in range(len(stored) - 4)]
            delivered = [str(e.id) for e in live_events] + [e["id"] for e in rest]
            assert sorted(delivered) == sorted(e["id"] for e in stored)  # each one, once
            assert "message" in [e["type"] for e in rest]  # the reply, after the gate


def test_chat_streams_tokens_actions_and_the_reply(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(client, name="mina")
    scripted.then(
        calls(("ws_write", {"path": "a.md", "content": "x"})),
        speak("All saved for you."),
    )
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "chat", "agent": "mina", "content": "Save", "requestId": "r1"})
        seen = receive_until(ws, "chat.done")
    kinds = [m["type"] for m in seen]
    assert kinds[0] == "chat.started"
    assert {m["requestId"] for m in seen} == {"r1"}
    actions = [m for m in seen if m["type"] == "action"]
    assert [(a["name"], a["success"]) for a in actions] == [
        ("ws_write", True),
        ("send_speech", True),
    ]
    assert [m["text"] for m in seen if m["type"] == "reply"] == ["All saved for you."]
    done = seen[-1]
    assert done["reply"] == "All saved for you."
    assert done["stoppedBy"] == "send_speech"
    assert done["sessionId"] == seen[0]["sessionId"]
    messages = client.get(f"/api/sessions/{done['sessionId']}/messages").json()
    assert [m["role"] for m in messages] == ["user", "assistant"]


def test_plain_text_replies_stream_as_tokens(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(client, name="mina")
    scripted.then("Hello there, friend.")
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "chat", "agent": "mina", "content": "Hi"})
        seen = receive_until(ws, "chat.done")
    tokens = "".join(m["text"] for m in seen if m["type"] == "token")
    assert tokens == "Hello there, friend."
    assert len([m for m in seen if m["type"] == "token"]) > 1
    assert seen[-1]["reply"] == "Hello there, friend."


def test_bad_messages_get_errors_and_the_connection_stays(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    with client.websocket_connect("/api/ws") as ws:
        ws.send_text("{not json")
        assert ws.receive_json()["error"] == "bad_request"
        ws.send_json({"type": "shout"})
        assert ws.receive_json()["error"] == "validation_error"
        ws.send_json({"type": "subscribe", "sessionId": "not-a-uuid"})
        assert "sessionId" in ws.receive_json()["message"]
        ws.send_json({"type": "subscribe", "sessionId": "2b5f8c1e-0000-4000-8000-000000000000"})
        assert ws.receive_json()["error"] == "not_found"
        ws.send_json({"type": "chat", "agent": "nobody", "content": "hi", "requestId": "x"})
        missing = ws.receive_json()
        assert (missing["error"], missing["requestId"]) == ("not_found", "x")
        ws.send_json({"type": "chat", "agent": agent_id, "content": ""})
        assert "content" in ws.receive_json()["message"]
        ws.send_bytes(b"\x00\x01")
        assert ws.receive_json()["error"] == "bad_request"
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}


def test_a_reconnecting_client_gets_what_it_missed(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    scripted.then(speak("First."))
    client.post(f"/api/sessions/{session_id}/messages", json={"content": "one"})
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "subscribe", "sessionId": session_id, "afterSeq": 0})
        subscribed = ws.receive_json()
        assert subscribed["type"] == "subscribed"
        replayed = [ws.receive_json()["event"]["type"] for _ in range(4)]
    assert replayed == ["user", "tool_call", "token_usage", "tool_result"]
    assert subscribed["seq"] >= 4


def test_unsubscribe_stops_the_feed_and_closing_cleans_up(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    hub: EventHub = client.app.state.hub  # type: ignore[attr-defined]
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "subscribe", "sessionId": session_id})
        ws.receive_json()
        assert hub.client_count == 1
        ws.send_json({"type": "unsubscribe", "sessionId": session_id})
        assert ws.receive_json()["type"] == "unsubscribed"
        assert hub.client_count == 0
        ws.send_json({"type": "subscribe", "sessionId": session_id})
        ws.receive_json()
    for _ in range(100):
        if hub.client_count == 0:
            break
        threading.Event().wait(0.01)
    assert hub.client_count == 0


def test_a_page_from_another_origin_is_refused(client: TestClient) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect("/api/ws", headers={"Origin": "https://evil.example"}),
    ):
        pass
    assert refused.value.code == 4403
    with client.websocket_connect("/api/ws", headers={"Origin": "http://127.0.0.1:8080"}) as ws:
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}


@pytest.fixture
def secured(settings: Settings, db: Database) -> Iterator[tuple[TestClient, str]]:
    _, secret = TokenStore(db).create("tests")
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai"))
    with LocalClient(create_app(settings, db, router=router, auth=True)) as client:
        yield client, secret


def test_websockets_need_the_token_when_auth_is_on(secured: tuple[TestClient, str]) -> None:
    client, secret = secured
    with pytest.raises(WebSocketDisconnect) as refused, client.websocket_connect("/api/ws"):
        pass
    assert refused.value.code == 4401
    with client.websocket_connect(f"/api/ws?access_token={secret}") as ws:
        ws.send_json({"type": "ping"})
        assert ws.receive_json()["type"] == "pong"
    headers = {"Authorization": f"Bearer {secret}"}
    with client.websocket_connect("/api/ws", headers=headers) as ws:
        ws.send_json({"type": "ping"})
        assert ws.receive_json()["type"] == "pong"


def test_revoking_a_token_closes_the_websockets_opened_with_it(
    secured: tuple[TestClient, str], db: Database
) -> None:
    client, secret = secured
    _, other = TokenStore(db).create("other")
    with (
        client.websocket_connect(f"/api/ws?access_token={secret}") as revoked,
        client.websocket_connect(f"/api/ws?access_token={other}") as kept,
    ):
        for ws in (revoked, kept):
            ws.send_json({"type": "ping"})
            assert ws.receive_json() == {"type": "pong"}
        TokenStore(db).revoke("tests")  # as `opencrab token revoke tests` does, from any process
        closed = ping_until_closed(revoked)
        assert closed.code == 4401
        assert "revoked" in closed.reason
        kept.send_json({"type": "ping"})
        assert kept.receive_json() == {"type": "pong"}  # another token's socket stays open


async def test_a_slow_client_is_dropped_without_holding_up_the_others(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "OUTBOX_SIZE", 5)
    hub = EventHub(db)
    trace = chain(uuid4())  # 7 events
    trace_id = str(trace[0].trace_id)
    slow = Client(name="slow", outbox=asyncio.Queue(maxsize=5))
    fast = Client(name="fast", outbox=asyncio.Queue(maxsize=10_000))
    await hub.subscribe(slow, trace_id, [trace_id])
    await hub.subscribe(fast, trace_id, [trace_id])
    EventLog(db).append_many(trace)
    for _ in range(3):
        await hub.deliver_new()
    assert fast.outbox.qsize() == len(trace)
    assert slow.closed.is_set()
    assert slow.close_code == live.SLOW_CLIENT
    assert hub.client_count == 1  # the slow one is gone, nothing else waits for it
    assert hub.dropped == 1


def test_a_held_call_is_announced_and_the_chat_follows_up_once_it_is_approved(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent = new_agent(client, name="mina", toolIds=[tool_id("execute_command")])
    settings = {"executeCommand": True, "approvals": {"execute_command": "always"}}
    client.put(f"/api/agents/{agent['id']}/tool-settings", json=settings)
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "chat", "agent": "mina", "content": "Run it", "requestId": "r1"})
        seen = receive_until(ws, "chat.done")
        waiting = [m for m in seen if m["type"] == "approval.waiting"]
        assert [(m["toolName"], m["arguments"]) for m in waiting] == [
            ("execute_command", {"command": "echo made"})
        ]
        done = seen[-1]
        assert (done["stoppedBy"], done["approvalId"]) == ("approval", waiting[0]["approvalId"])
        assert f"/sessions/{done['sessionId']}" in waiting[0]["notice"]

        approved = client.post(f"/api/approvals/{done['approvalId']}/approve")
        assert approved.status_code == 200, approved.text
        follow = receive_until(ws, "chat.done")
    assert {(m["requestId"], m.get("followUp")) for m in follow} == {("r1", True)}
    assert [m["text"] for m in follow if m["type"] == "reply"] == ["It printed made."]
    assert follow[-1]["sessionId"] == done["sessionId"]
    assert follow[-1]["reply"] == "It printed made."
    tool_results = [m for m in scripted.requests[1].messages if m.role == "tool"]
    assert [("made" in str(m.content), m.is_error) for m in tool_results] == [(True, False)]
    messages = client.get(f"/api/sessions/{done['sessionId']}/messages").json()
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Run it"),
        ("assistant", "It printed made."),
    ]
