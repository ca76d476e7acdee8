"""Discussions over REST and the WebSocket: start, follow, join, and a person posting in."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.llm.types import ChatRequest
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent


@pytest.fixture
def held(scripted: ScriptedProvider) -> Iterator[threading.Event]:
    """The model answers nothing until the test sets the event."""
    scripted.hold = threading.Event()
    yield scripted.hold
    scripted.hold.set()  # never leave a worker thread waiting


def wait_until_ended(client: TestClient, discussion_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = client.get(f"/api/discussions/{discussion_id}").json()
        if body["status"] != "active" and not body["running"]:
            return dict(body)
        time.sleep(0.05)
    raise AssertionError(f"discussion {discussion_id} never ended")


def prompt_of(request: ChatRequest) -> str:
    return str(request.messages[-1].content)


def test_start_follow_post_and_join_over_rest(
    client: TestClient, scripted: ScriptedProvider, held: threading.Event
) -> None:
    ann, ben = new_agent(client, "ann"), new_agent(client, "ben")
    cat = new_agent(client, "cat")
    scripted.then(speak("賛成です"), speak("反対です"), speak("費用を試算します"), speak("同意"))

    started = client.post(
        "/api/discussions",
        json={"theme": "週休3日制", "participants": ["ann", ben["id"]], "maxTurns": 4},
    )
    assert started.status_code == 201, started.text
    body = started.json()
    discussion_id = body["id"]
    assert (body["status"], body["mode"], body["running"], body["turn"]) == (
        "active",
        "autonomous",
        True,
        0,
    )
    assert [(p["name"], p["role"]) for p in body["participants"]] == [
        ("ann", "participant"),
        ("ben", "participant"),
    ]

    # the first turn waits for the model: a person speaks in and an agent joins meanwhile
    deadline = time.monotonic() + 60
    while scripted.calls_started == 0:  # (its prompt is built by then)
        assert time.monotonic() < deadline, "the first turn never reached the model"
        time.sleep(0.01)
    posted = client.post(
        f"/api/discussions/{discussion_id}/messages",
        json={"content": "費用の面も考えてください", "senderName": "Mentor"},
    )
    assert posted.status_code == 201, posted.text
    assert (posted.json()["role"], posted.json()["speakerName"]) == ("user", "Mentor")
    joined = client.post(f"/api/discussions/{discussion_id}/participants", json={"agent": "cat"})
    assert joined.status_code == 200, joined.text
    assert [p["name"] for p in joined.json()["participants"]] == ["ann", "ben", "cat"]
    held.set()

    ended = wait_until_ended(client, discussion_id)
    assert (ended["status"], ended["endedBy"], ended["turn"]) == ("completed", "max_turns", 4)
    said = [(m["role"], m["speakerName"], m["content"]) for m in ended["messages"]]
    assert said == [
        ("user", "Mentor", "費用の面も考えてください"),
        ("assistant", "ann", "賛成です"),
        ("assistant", "ben", "反対です"),
        ("assistant", "cat", "費用を試算します"),
        ("assistant", "ann", "同意"),
    ]
    ids = {"ann": ann["id"], "ben": ben["id"], "cat": cat["id"]}
    assert all(m["speakerId"] == ids[m["speakerName"]] for m in ended["messages"][1:])
    # ann's first prompt was built before the post; everyone after her hears it
    assert "費用の面も考えてください" not in prompt_of(scripted.requests[0])
    heard = "[Mentor's instruction] Mentor: 費用の面も考えてください"
    assert heard in prompt_of(scripted.requests[1])
    assert "cat" not in prompt_of(scripted.requests[0])

    follow = client.get(
        f"/api/discussions/{discussion_id}/messages",
        params={"afterId": ended["messages"][2]["id"]},
    )
    assert [m["content"] for m in follow.json()] == ["費用を試算します", "同意"]
    listed = client.get("/api/discussions", params={"status": "completed"}).json()
    assert [d["id"] for d in listed] == [discussion_id]
    # the same messages through the sessions API, speakers included
    via_sessions = client.get(f"/api/sessions/{discussion_id}/messages").json()
    assert [m["speakerName"] for m in via_sessions] == ["Mentor", "ann", "ben", "cat", "ann"]


def test_wrong_requests_get_clear_errors_and_change_nothing(
    client: TestClient, scripted: ScriptedProvider, held: threading.Event
) -> None:
    new_agent(client, "ann")
    new_agent(client, "ben")
    missing = "00000000-0000-4000-8000-000000000000"
    error_of(client.get(f"/api/discussions/{missing}"), 404, "not_found")
    error_of(
        client.post(f"/api/discussions/{missing}/messages", json={"content": "hi"}),
        404,
        "not_found",
    )
    message = error_of(
        client.post("/api/discussions", json={"theme": "t", "participants": ["ann"]}),
        400,
        "validation_error",
    )
    assert "at least two participants" in message
    error_of(
        client.post("/api/discussions", json={"theme": "t", "participants": ["ann", "zed"]}),
        404,
        "not_found",
    )

    scripted.then(speak("まず一言"))
    started = client.post(
        "/api/discussions", json={"theme": "t", "participants": ["ann", "ben"]}
    ).json()
    url = f"/api/discussions/{started['id']}"
    error_of(client.post(f"{url}/participants", json={"agent": "zed"}), 404, "not_found")
    error_of(client.post(f"{url}/participants", json={"agent": "ann"}), 409, "conflict")
    assert client.delete(url).status_code == 204  # stops it while its first turn waits
    held.set()
    stopped = wait_until_ended(client, started["id"])
    assert (stopped["status"], stopped["endedBy"]) == ("completed", "stopped")
    error_of(client.post(f"{url}/messages", json={"content": "遅すぎた"}), 409, "conflict")
    error_of(client.delete(url), 409, "conflict")
    assert client.get(f"{url}/messages").json() == []


def receive_until(ws: Any, wanted: str, *, limit: int = 200) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for _ in range(limit):
        message = ws.receive_json()
        seen.append(message)
        if message["type"] == wanted:
            return seen
    raise AssertionError(f"no {wanted!r} in {seen}")


def test_start_follow_post_and_join_over_the_websocket(
    client: TestClient, scripted: ScriptedProvider, held: threading.Event
) -> None:
    ann, ben = new_agent(client, "ann"), new_agent(client, "ben")
    cat = new_agent(client, "cat")
    scripted.then(
        speak("賛成です"),
        calls(("send_noreact", {})),
        calls(("declare_done", {})),
        calls(("declare_done", {})),
        calls(("declare_done", {})),
    )
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json(
            {
                "type": "discussion.start",
                "theme": "週休3日制",
                "participants": ["ann", "ben"],
                "maxTurns": 10,
                "requestId": "r1",
            }
        )
        started = ws.receive_json()
        assert (started["type"], started["requestId"]) == ("discussion.started", "r1")
        session_id = started["sessionId"]
        assert started["discussion"]["running"] is True
        subscribed = ws.receive_json()
        assert subscribed["type"] == "subscribed"
        assert [p["name"] for p in subscribed["participants"]] == ["ann", "ben"]

        ws.send_json(
            {
                "type": "discussion.post",
                "sessionId": session_id,
                "content": "結論を急がないで",
                "senderName": "Mentor",
                "requestId": "r2",
            }
        )
        posted = receive_until(ws, "discussion.posted")[-1]
        assert posted["message"]["speakerName"] == "Mentor"
        ws.send_json(
            {"type": "discussion.join", "sessionId": session_id, "agent": "cat", "requestId": "r3"}
        )
        joined = receive_until(ws, "discussion.joined")[-1]
        assert (joined["agentId"], joined["requestId"]) == (cat["id"], "r3")
        held.set()

        seen = receive_until(ws, "discussion.ended")
    turns = [(m["agent"], m["spoke"], m["action"]) for m in seen if m["type"] == "discussion.turn"]
    assert turns == [
        ("ann", "賛成です", "send_speech"),
        ("ben", None, "send_noreact"),
        ("ben", None, "declare_done"),  # ann spoke last; ben and cat are unheard: ben first
        ("cat", None, "declare_done"),
        ("ann", None, "declare_done"),
    ]
    assert seen[-1]["endedBy"] == "all_done"
    events = [m for m in seen if m["type"] == "event"]
    speeches = [
        (m.get("agentId"), m["event"]["content"]["text"])
        for m in events
        if m["event"]["type"] == "message"
    ]
    assert (ann["id"], "賛成です") in speeches
    assert {m.get("agentId") for m in events} >= {ann["id"], ben["id"], cat["id"]}
