"""A session's events with their `seq`: over REST, and as the WebSocket's resume cursor."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient

from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent


def chat_turns(client: TestClient, scripted: ScriptedProvider, *texts: str) -> tuple[str, str]:
    agent_id = new_agent(client)["id"]
    session_id = str(client.post("/api/sessions", json={"agentId": agent_id}).json()["id"])
    for text in texts:
        scripted.then(calls(("ws_list", {})), speak(f"re: {text}"))
        posted = client.post(f"/api/sessions/{session_id}/messages", json={"content": text})
        assert posted.status_code == 201, posted.text
    return agent_id, session_id


def test_a_chat_sessions_events_in_order_with_seq_and_agent(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id, session_id = chat_turns(client, scripted, "一つ目", "二つ目")
    every = client.get(f"/api/sessions/{session_id}/events").json()
    trace = client.get(f"/api/traces/{session_id}/events").json()
    assert sorted(e["event"]["id"] for e in every) == sorted(e["id"] for e in trace)
    seqs = [e["seq"] for e in every]
    assert seqs == sorted(set(seqs))
    assert {e["agentId"] for e in every} == {agent_id}
    assert every[0]["event"]["type"] == "user"
    assert every[0]["event"]["content"] == {"text": "一つ目"}

    newest = client.get(
        f"/api/sessions/{session_id}/events", params={"limit": 3, "newest": "true"}
    ).json()
    assert newest == every[-3:]
    before = client.get(
        f"/api/sessions/{session_id}/events",
        params={"beforeSeq": every[-3]["seq"], "limit": 2, "newest": "true"},
    ).json()
    assert before == every[-5:-3]
    after = client.get(
        f"/api/sessions/{session_id}/events", params={"afterSeq": every[1]["seq"], "limit": 2}
    ).json()
    assert after == every[2:4]


def test_a_discussions_events_name_their_agents_and_posts_none(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    ann, ben = new_agent(client, "ann"), new_agent(client, "ben")
    scripted.hold = threading.Event()
    try:
        scripted.then(speak("賛成です"))
        talk = client.post(
            "/api/discussions",
            json={"theme": "週休3日制", "participants": ["ann", "ben"], "maxTurns": 2},
        ).json()["id"]
        client.post(f"/api/discussions/{talk}/messages", json={"content": "費用も考えて"})
    finally:
        scripted.hold.set()
    deadline = threading.Event()
    for _ in range(600):
        if client.get(f"/api/discussions/{talk}").json()["status"] == "completed":
            break
        deadline.wait(0.05)
    events = client.get(f"/api/sessions/{talk}/events", params={"afterSeq": 0}).json()
    posts = [e for e in events if e["agentId"] is None]
    assert [p["event"]["content"]["text"] for p in posts] == ["費用も考えて"]
    speakers = {e["agentId"] for e in events if e["event"]["type"] == "message"}
    assert speakers == {ann["id"], ben["id"]}


def test_missing_sessions_and_bad_cursors_are_named(client: TestClient) -> None:
    missing = "2b5f8c1e-0000-4000-8000-000000000000"
    error_of(client.get(f"/api/sessions/{missing}/events"), 404, "not_found")
    assert "afterSeq" in error_of(
        client.get(f"/api/sessions/{missing}/events", params={"afterSeq": -1}),
        400,
        "validation_error",
    )


def receive_events(ws: Any, count: int) -> list[dict[str, Any]]:
    got = []
    while len(got) < count:
        message = ws.receive_json()
        if message["type"] == "event":
            got.append(message)
    return got


def test_resuming_after_the_last_seq_received_gives_exactly_the_rest(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    _, session_id = chat_turns(client, scripted, "one", "two")
    stored = client.get(f"/api/sessions/{session_id}/events", params={"afterSeq": 0}).json()
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "subscribe", "sessionId": session_id, "afterSeq": 0})
        assert ws.receive_json()["type"] == "subscribed"
        first = receive_events(ws, 5)
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "subscribe", "sessionId": session_id, "afterSeq": first[-1]["seq"]})
        assert ws.receive_json()["type"] == "subscribed"
        rest = receive_events(ws, len(stored) - 5)
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}  # nothing more was sent
    got = first + rest
    assert [m["seq"] for m in got] == [e["seq"] for e in stored]
    assert [m["event"]["id"] for m in got] == [e["event"]["id"] for e in stored]


def test_live_events_carry_their_seq(client: TestClient, scripted: ScriptedProvider) -> None:
    _, session_id = chat_turns(client, scripted)
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "subscribe", "sessionId": session_id})
        assert ws.receive_json()["type"] == "subscribed"
        scripted.then(speak("ライブ"))
        posted = client.post(f"/api/sessions/{session_id}/messages", json={"content": "hi"})
        assert posted.status_code == 201
        live = receive_events(ws, 5)  # user, tool_call, token_usage, tool_result, message
    stored = client.get(f"/api/sessions/{session_id}/events", params={"afterSeq": 0}).json()
    assert [(m["seq"], m["event"]["id"]) for m in live] == [
        (e["seq"], e["event"]["id"]) for e in stored[:5]
    ]
