"""Following an agent-mode session on `/api/ws`: `subscribed`, then one notice per change
of the real runner (scripted `other` sub-agents in real tmux), nothing of another session,
unsubscribe, unknown ids and the subscription limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from opencrab.server.api import ws
from tests.agentmode.runner_support import make_repo, write_scripts
from tests.fakes.scripted_provider import ScriptedProvider


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~/.gwt/sessions lands here


def plan(client: TestClient, scripted: ScriptedProvider, repo: Path, name: str) -> str:
    """A planned one-task session; `name` makes the task's branch."""
    one_task = {"tasks": [{"id": "task-001", "name": name, "description": "質問してから作る"}]}
    scripted.then(json.dumps(one_task))
    response = client.post(
        "/api/agent-mode/sessions", json={"repository": str(repo), "request": "日本語の依頼"}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def notices_until(ws_conn: Any, done: Any) -> list[dict[str, Any]]:
    """Messages received until `done(message)` is true (that one included)."""
    seen: list[dict[str, Any]] = []
    for _ in range(500):
        message = ws_conn.receive_json()
        seen.append(message)
        if done(message):
            return seen
    raise AssertionError(f"no end among {seen}")


def test_a_subscriber_follows_its_agent_mode_session_live(
    client: TestClient, scripted: ScriptedProvider, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "git")
    watched = plan(client, scripted, repo, "ask-first")
    other = plan(client, scripted, make_repo(tmp_path / "git2"), "other-work")
    question = {
        "hook_event_name": "Notification",
        "notification_type": "permission_prompt",
        "message": "hello.txt を作りますか?",
    }
    stop = {"hook_event_name": "Stop", "last_assistant_message": "作りました。"}
    answer_file = tmp_path / "answer.txt"
    asking = write_scripts(
        tmp_path / "asking",
        {
            "task-001": [
                {"signal": question},
                {"ask": "hello.txt を作りますか?", "answer_to": str(answer_file)},
                {"write": "hello.txt", "content": "hi"},
                {"signal": stop},
                {"sleep": 600},
            ]
        },
    )
    quick = write_scripts(tmp_path / "quick", {"task-001": [{"print": "other"}]})
    with client.websocket_connect("/api/ws") as conn:
        conn.send_json({"type": "subscribe", "sessionId": watched})
        assert conn.receive_json() == {
            "type": "subscribed",
            "sessionId": watched,
            "kind": "agentMode",
            "status": "Active",
        }
        base = f"/api/agent-mode/sessions/{watched}"
        started = client.post(f"{base}/start", json={"cli": "other", "command": asking})
        assert started.status_code == 200, started.text
        other_start = {"cli": "other", "command": quick}
        assert client.post(f"/api/agent-mode/sessions/{other}/start", json=other_start).is_success

        waiting = notices_until(conn, lambda m: m.get("subAgentStatus") == "WaitingInput")
        assert all(m["sessionId"] == watched for m in waiting), waiting
        assert {m["type"] for m in waiting} == {"agentMode"}
        assert waiting[-1]["taskId"] == "task-001"
        assert waiting[-1]["taskStatus"] == "Running"
        assert "Running" in {m["taskStatus"] for m in waiting}
        run = client.get(f"{base}/run").json()
        assert run["run"]["questions"] == {"task-001": "hello.txt を作りますか?"}

        answered = client.post(f"{base}/tasks/task-001/answer", json={"text": "はい"})
        assert answered.status_code == 200, answered.text
        finished = notices_until(conn, lambda m: m.get("sessionStatus") == "Completed")
        assert all(m["sessionId"] == watched for m in finished), finished
        statuses = [(m["taskStatus"], m["subAgentStatus"]) for m in finished]
        assert ("Running", "Running") in statuses  # the answer took it back to work
        assert ("Completed", "Completed") in statuses
        assert answer_file.read_text(encoding="utf-8") == "はい"

        conn.send_json({"type": "unsubscribe", "sessionId": watched})
        assert conn.receive_json() == {"type": "unsubscribed", "sessionId": watched}
        conn.send_json({"type": "ping"})
        assert conn.receive_json() == {"type": "pong"}  # nothing of the session came between
    other_run = client.get(f"/api/agent-mode/sessions/{other}/run").json()
    assert other_run["tasks"][0]["status"] in {"Running", "Completed"}  # it did run meanwhile


def test_unknown_ids_and_the_subscription_limit(
    client: TestClient,
    scripted: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo(tmp_path / "git")
    first, second = plan(client, scripted, repo, "one"), plan(client, scripted, repo, "two")
    monkeypatch.setattr(ws, "MAX_SUBSCRIPTIONS", 1)
    with client.websocket_connect("/api/ws") as conn:
        unknown = str(uuid4())
        conn.send_json({"type": "subscribe", "sessionId": unknown})
        error = conn.receive_json()
        assert (error["type"], error["error"]) == ("error", "not_found")
        assert unknown in error["message"]
        conn.send_json({"type": "subscribe", "sessionId": first})
        assert conn.receive_json()["type"] == "subscribed"
        conn.send_json({"type": "subscribe", "sessionId": second})
        assert conn.receive_json()["error"] == "too_many_subscriptions"
        conn.send_json({"type": "unsubscribe", "sessionId": first})
        assert conn.receive_json()["type"] == "unsubscribed"
        conn.send_json({"type": "subscribe", "sessionId": second})
        assert conn.receive_json()["kind"] == "agentMode"
