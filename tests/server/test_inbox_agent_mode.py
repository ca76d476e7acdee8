"""An agent-mode sub-agent waiting for input is an inbox item (issue 37, section 2): the
real runner (a scripted `other` sub-agent in real tmux) asks, `GET /api/inbox` lists the
question with the session and task to answer, the answer route the item names answers
it, and the item is gone; a filter by agent leaves it out (it belongs to no agent)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.agentmode.runner_support import make_repo, write_scripts
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import new_agent

QUESTION = "hello.txt を作りますか?"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~/.gwt/sessions lands here


def questions(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    found = client.get("/api/inbox", params={"kind": "agent_mode_question", **params})
    assert found.status_code == 200, found.text
    return list(found.json()["items"])


def until(what: str, probe: Any, secs: float = 120) -> Any:
    deadline = time.monotonic() + secs
    while not (found := probe()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)
    return found


def test_an_agent_mode_question_waits_in_the_inbox_and_is_answered_from_it(
    client: TestClient, scripted: ScriptedProvider, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "git")
    scripted.then(
        json.dumps({"tasks": [{"id": "task-001", "name": "ask-first", "description": "質問"}]})
    )
    made = client.post(
        "/api/agent-mode/sessions", json={"repository": str(repo), "request": "日本語の依頼"}
    )
    assert made.status_code == 201, made.text
    session_id = str(made.json()["id"])
    signal = {
        "hook_event_name": "Notification",
        "notification_type": "permission_prompt",
        "message": QUESTION,
    }
    stop = {"hook_event_name": "Stop", "last_assistant_message": "作りました。"}
    answer_file = tmp_path / "answer.txt"
    command = write_scripts(
        tmp_path / "asking",
        {
            "task-001": [
                {"signal": signal},
                {"ask": QUESTION, "answer_to": str(answer_file)},
                {"write": "hello.txt", "content": "hi"},
                {"signal": stop},
                {"sleep": 600},
            ]
        },
    )
    base = f"/api/agent-mode/sessions/{session_id}"
    started = client.post(f"{base}/start", json={"cli": "other", "command": command})
    assert started.status_code == 200, started.text

    (item,) = until("the question in the inbox", lambda: questions(client))
    assert item["id"] == f"agent_mode_question:{session_id}/task-001"
    assert (item["subjectId"], item["taskId"], item["sessionId"]) == (
        "task-001",
        "task-001",
        session_id,
    )
    assert (item["agentId"], item["agent"]) == (None, None)
    assert item["link"] == f"/agent-mode/{session_id}"
    assert QUESTION in item["summary"]
    assert item["detail"] == QUESTION
    assert client.get("/api/inbox/count").json()["count"] >= 1
    aki = new_agent(client, "aki")
    assert questions(client, agent=aki["id"]) == []  # it is no agent's of the fleet

    answered = client.post(f"{base}/tasks/{item['taskId']}/answer", json={"text": "はい"})
    assert answered.status_code == 200, answered.text
    until("the question to leave the inbox", lambda: questions(client) == [])
    until("the answer to reach the sub-agent", answer_file.exists)
    assert answer_file.read_text(encoding="utf-8") == "はい"
