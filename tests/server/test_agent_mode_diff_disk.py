"""`GET …/tasks/{task}/diff` (a finished task's patch and delivery) and `GET …/disk` (its
worktrees' disk use), over a real run of the scripted `other` sub-agent in real tmux."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from tests.agentmode.runner_support import make_repo, write_scripts
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~/.gwt/sessions lands here


def test_diff_and_disk_use_of_a_finished_task(
    client: TestClient, scripted: ScriptedProvider, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "git")
    plan = {"tasks": [{"id": "task-001", "name": "readme", "description": "書く"}]}
    scripted.then(json.dumps(plan))
    created = client.post(
        "/api/agent-mode/sessions", json={"repository": str(repo), "request": "README を書く"}
    )
    assert created.status_code == 201, created.text
    base = f"/api/agent-mode/sessions/{created.json()['id']}"
    error_of(client.get(f"{base}/tasks/task-001/diff"), 404, "not_found")  # not run yet
    before = client.get(f"{base}/disk").json()
    assert before == {"sessionBytes": 0, "repositoryWorktreesBytes": 0, "worktrees": []}

    command = write_scripts(
        tmp_path / "scripts",
        {"task-001": [{"write": "README.md", "content": "# 日本語の説明\n" * 200}]},
    )
    assert client.post(f"{base}/start", json={"cli": "other", "command": command}).is_success

    def delivered() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get(f"{base}/run").json()
        return body if body["run"]["outcomes"].get("task-001") else None

    deadline = time.monotonic() + 60
    while delivered() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert delivered() is not None

    diff = client.get(f"{base}/tasks/task-001/diff")
    assert diff.status_code == 200, diff.text
    body = diff.json()
    assert body["taskId"] == "task-001"
    assert body["branch"] == "agent/readme"
    assert (body["filesChanged"], body["insertions"], body["deletions"]) == (1, 200, 0)
    assert "README.md" in body["stat"]
    assert "+# 日本語の説明" in body["patch"]
    assert "agent/readme" in body["delivery"]  # no remote: the local branch
    assert body["pullRequestUrl"] is None

    disk = client.get(f"{base}/disk").json()
    [worktree] = disk["worktrees"]
    assert worktree["branch"] == "agent/readme"
    assert worktree["exists"] is True
    assert worktree["bytes"] > 0
    assert disk["sessionBytes"] == worktree["bytes"]
    assert disk["repositoryWorktreesBytes"] >= disk["sessionBytes"]

    error_of(client.get(f"{base}/tasks/task-009/diff"), 404, "not_found")
    error_of(client.get(f"{base}/tasks/nope/diff"), 400, "validation_error")
    error_of(client.get(f"/api/agent-mode/sessions/{uuid4()}/disk"), 404, "not_found")
