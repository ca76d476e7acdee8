"""`/api/agent-mode/sessions`: plan (201, Active, tasks Pending), list, read, edit the plan;
camelCase JSON over the seed's record; errors in the API's shape."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from tests.agentmode.runner_support import make_repo, write_scripts
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of

PLAN = {
    "tasks": [
        {"id": "task-001", "name": "Parser", "description": "Write the parser."},
        {"id": "task-002", "name": "Tests", "description": "Test it.",
         "dependencies": ["task-001"], "worktree_strategy": "Shared"},
    ]
}  # fmt: skip


@pytest.fixture(autouse=True)
def sessions_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~/.gwt/sessions lands here
    return tmp_path / "home" / ".gwt" / "sessions"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def create(client: TestClient, scripted: ScriptedProvider, repo: Path) -> dict[str, object]:
    scripted.then(json.dumps(PLAN))
    response = client.post(
        "/api/agent-mode/sessions", json={"repository": str(repo), "request": "Build a parser"}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_plan_list_read_and_edit(
    client: TestClient, scripted: ScriptedProvider, repo: Path, sessions_dir: Path
) -> None:
    session = create(client, scripted, repo)
    assert session["status"] == "Active"
    assert session["repositoryPath"] == str(repo.resolve())
    tasks = session["tasks"]
    assert isinstance(tasks, list)
    assert [t["status"] for t in tasks] == ["Pending", "Pending"]
    assert tasks[1]["worktreeStrategy"] == "Shared"
    assert session["conversation"]["messages"][1] == {  # type: ignore[index]
        "role": "User",
        "content": "Build a parser",
        "timestamp": session["conversation"]["messages"][1]["timestamp"],  # type: ignore[index]
    }
    on_disk = json.loads((sessions_dir / f"{session['id']}.json").read_text(encoding="utf-8"))
    assert on_disk["tasks"][1]["worktree_strategy"] == "Shared"  # the file keeps the seed's keys

    listed = client.get("/api/agent-mode/sessions").json()
    assert [(s["id"], s["status"], s["title"], s["tasksTotal"]) for s in listed] == [
        (session["id"], "Active", "Build a parser", 2)
    ]
    assert listed[0]["taskCounts"]["pending"] == 2
    assert client.get("/api/agent-mode/sessions?status=Paused").json() == []
    assert client.get(f"/api/agent-mode/sessions/{session['id']}").json() == session

    edited = client.put(
        f"/api/agent-mode/sessions/{session['id']}/plan",
        json={
            "tasks": [
                {
                    "id": "task-001",
                    "name": "All",
                    "description": "Everything",
                    "worktreeStrategy": "New",
                }
            ]
        },
    )
    assert edited.status_code == 200, edited.text
    assert [t["name"] for t in edited.json()["tasks"]] == ["All"]
    assert client.get("/api/agent-mode/sessions").json()[0]["tasksTotal"] == 1


def test_bad_plans_and_unknown_sessions_are_named(
    client: TestClient, scripted: ScriptedProvider, repo: Path, tmp_path: Path
) -> None:
    session = create(client, scripted, repo)
    cyclic = {"tasks": [
        {"id": "task-001", "name": "a", "dependencies": ["task-002"]},
        {"id": "task-002", "name": "b", "dependencies": ["task-001"]},
    ]}  # fmt: skip
    response = client.put(f"/api/agent-mode/sessions/{session['id']}/plan", json=cyclic)
    assert "task-001 → task-002 → task-001" in error_of(response, 400, "invalid_plan")
    missing = client.get(f"/api/agent-mode/sessions/{uuid4()}")
    assert "not found" in error_of(missing, 404, "not_found")
    error_of(client.get("/api/agent-mode/sessions/nope"), 400, "validation_error")
    plain = tmp_path / "plain"
    plain.mkdir()
    response = client.post(
        "/api/agent-mode/sessions", json={"repository": str(plain), "request": "x"}
    )
    assert "not inside a git repository" in error_of(response, 400, "validation_error")
    response = client.post("/api/agent-mode/sessions", json={"repository": str(repo)})
    error_of(response, 400, "validation_error")


def test_start_watch_output_answer_retry_and_cleanup_over_rest(
    client: TestClient, scripted: ScriptedProvider, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "git")
    session = create(client, scripted, repo)
    base = f"/api/agent-mode/sessions/{session['id']}"
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [{"print": "parsing 日本"}, {"write": "parser.py", "content": "p"}],
            "task-002": [{"write": "test_parser.py", "content": "t"}],
        },
    )
    started = client.post(f"{base}/start", json={"cli": "other", "command": command})
    assert started.status_code == 200, started.text
    assert started.json()["run"]["startBranch"] == "main"
    error_of(client.post(f"{base}/start", json={"cli": "other", "command": command}), 409,
             "conflict")  # fmt: skip

    def finished() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get(f"{base}/run").json()
        return body if body["status"] != "Active" else None

    deadline = time.monotonic() + 60
    done = finished()
    while done is None and time.monotonic() < deadline:
        time.sleep(0.1)
        done = finished()
    assert done is not None
    assert done["status"] == "Completed"
    assert [t["status"] for t in done["tasks"]] == ["Completed", "Completed"]
    assert (
        done["tasks"][1]["assignedWorktree"]["path"] == done["tasks"][0]["assignedWorktree"]["path"]
    )  # Shared
    assert done["run"]["outcomes"]["task-002"]["filesChanged"] == 2
    output = client.get(f"{base}/tasks/task-001/output")
    assert output.status_code == 200, output.text
    assert "parsing 日本" in output.json()["text"]
    error_of(client.post(f"{base}/tasks/task-001/answer", json={"text": "y"}), 409, "conflict")
    error_of(client.post(f"{base}/tasks/task-001/retry"), 400, "invalid_transition")
    error_of(client.post(f"{base}/tasks/task-009/retry"), 404, "not_found")
    cleaned = client.post(f"{base}/cleanup", json={})
    assert cleaned.status_code == 200, cleaned.text
    assert cleaned.json()["removed"] == []
    assert list(cleaned.json()["refused"]) == [done["tasks"][0]["assignedWorktree"]["branchName"]]


def test_pause_resume_and_cancel_over_rest(
    client: TestClient, scripted: ScriptedProvider, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "git")
    session = create(client, scripted, repo)
    base = f"/api/agent-mode/sessions/{session['id']}"
    command = write_scripts(tmp_path / "scripts", {"task-001": [{"sleep": 600}]})
    assert client.post(f"{base}/start", json={"cli": "other", "command": command}).is_success
    assert client.post(f"{base}/pause").json()["status"] == "Paused"
    assert client.post(f"{base}/resume").json()["status"] == "Active"
    cancelled = client.post(f"{base}/cancel").json()
    assert cancelled["status"] == "Failed"
    assert {t["status"] for t in cancelled["tasks"]} == {"Cancelled"}


def test_answering_a_task_whose_pane_is_gone_says_it_ended(
    client: TestClient, scripted: ScriptedProvider, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "git")
    session = create(client, scripted, repo)
    base = f"/api/agent-mode/sessions/{session['id']}"
    command = write_scripts(tmp_path / "scripts", {"task-001": [{"sleep": 600}]})
    assert client.post(f"{base}/start", json={"cli": "other", "command": command}).is_success
    deadline = time.monotonic() + 60
    task = client.get(f"{base}/run").json()["tasks"][0]
    while task["subAgent"] is None and time.monotonic() < deadline:
        time.sleep(0.1)
        task = client.get(f"{base}/run").json()["tasks"][0]
    assert task["status"] == "Running"
    pane = task["subAgent"]["paneId"]
    subprocess.run(["tmux", "-L", tmux_socket, "kill-pane", "-t", pane], check=True)  # ours

    answered = client.post(f"{base}/tasks/task-001/answer", json={"text": "yes"})

    message = error_of(answered, 409, "pane_ended")
    assert message == f"task-001 has ended: its tmux pane {pane} is gone (nothing was typed)"
    error_of(client.get(f"{base}/tasks/task-001/output"), 404, "not_found")
    deadline = time.monotonic() + 60
    run = client.get(f"{base}/run").json()
    while run["tasks"][0]["status"] == "Running" and time.monotonic() < deadline:
        time.sleep(0.1)
        run = client.get(f"{base}/run").json()
    assert run["tasks"][0]["status"] == "Failed"
    assert "pane is gone" in run["tasks"][0]["result"]["error"]


def test_a_repository_path_over_the_os_limits_is_a_400(client: TestClient, tmp_path: Path) -> None:
    """A name longer than the file system allows (255 bytes), or a whole path longer than
    the OS's (4095 bytes): the request is bad, not the server (ENAMETOOLONG)."""
    long_name = tmp_path / ("a" * 300)
    deep = ("/" + "b" * 200) * 21
    for repository in (str(long_name), deep[:4096]):  # 4096 bytes: the request's own limit
        response = client.post(
            "/api/agent-mode/sessions", json={"repository": repository, "request": "x"}
        )
        message = error_of(response, 400, "validation_error")
        assert "too long" in message
