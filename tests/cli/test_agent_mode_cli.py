"""`opencrab agent-mode plan|status` end to end against the fake OpenAI server."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opencrab.cli import build_app
from tests.agentmode.runner_support import make_repo, write_scripts
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.fakes.ports import closed_port

CHAT = "/v1/chat/completions"
runner = CliRunner()
app = build_app()
PLAN = {
    "tasks": [
        {"id": "task-001", "name": "JWT認証の実装", "description": "JWT"},
        {"id": "task-002", "name": "ログイン画面", "description": "画面",
         "dependencies": ["task-001"]},
    ]
}  # fmt: skip


@pytest.fixture(autouse=True)
def openai_fake(
    fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> FakeLlmServer:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    closed = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", closed)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", closed)
    return fake_llm_server


def ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr}{result.stdout}"
    return result.stdout


def test_plan_then_status(openai_fake: FakeLlmServer, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    openai_fake.reply(CHAT, Reply(json=completion({"content": json.dumps(PLAN)})))
    planned = json.loads(ok("agent-mode", "plan", str(repo), "認証機能を実装して", "--json"))
    assert planned["status"] == "Active"
    assert [t["name"] for t in planned["tasks"]] == ["JWT認証の実装", "ログイン画面"]
    assert planned["tasks"][1]["worktree_strategy"] == "New"  # the seed's file format
    file = tmp_path / "home" / ".gwt" / "sessions" / f"{planned['id']}.json"
    assert json.loads(file.read_text(encoding="utf-8")) == planned
    [row] = json.loads(ok("agent-mode", "status", "--json"))
    assert (row["id"], row["title"], row["tasks_total"]) == (planned["id"], "認証機能を実装して", 2)
    shown = ok("agent-mode", "status", planned["id"])
    assert "ログイン画面" in shown
    assert "task-002" in shown
    listed = ok("agent-mode", "status")
    assert planned["id"] in listed


def test_status_of_an_unknown_session_is_an_error() -> None:
    result = runner.invoke(app, ["agent-mode", "status", "0b0d2e4c-1f0e-4a39-9a4e-1c2d3e4f5a6b"])
    assert result.exit_code == 1
    assert "not found" in result.stderr
    result = runner.invoke(app, ["agent-mode", "plan", "/nonexistent/repo", "x"])
    assert result.exit_code == 1
    assert "not a directory" in result.stderr


def test_start_runs_the_plan_with_the_other_cli_then_status_and_cleanup(
    openai_fake: FakeLlmServer, tmp_path: Path, tmux_socket: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    openai_fake.reply(CHAT, Reply(json=completion({"content": json.dumps(PLAN)})))
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [{"write": "jwt.py", "content": "jwt"}],
            "task-002": [{"write": "login.py", "content": "login"}],
        },
    )
    started = ok("agent-mode", "start", str(repo), "認証機能を実装して", "--cli", "other",
                 "--command", shlex.join(command), "--yes", "--ask")  # fmt: skip
    assert "task-002 Completed" in started
    [row] = json.loads(ok("agent-mode", "status", "--json"))
    assert row["status"] == "Completed"
    shown = json.loads(ok("agent-mode", "status", row["id"], "--json"))
    assert shown["run"]["full_auto"] is False  # --ask: the CLI asks before acting
    outcomes = shown["run"]["outcomes"]
    assert outcomes["task-002"]["files_changed"] == 2  # its own file and task-001's, merged
    assert [t["sub_agent"]["status"] for t in shown["tasks"]] == ["Completed", "Completed"]

    kept = json.loads(ok("agent-mode", "cleanup", "--json"))
    assert kept["removed"] == []
    assert sorted(kept["refused"]) == sorted(o["branch"] for o in outcomes.values())
    removed = json.loads(ok("agent-mode", "cleanup", "--force", "--json"))
    assert sorted(removed["removed"]) == sorted(kept["refused"])
    assert not (repo / ".worktrees").exists() or not list((repo / ".worktrees").iterdir())


def test_answer_names_a_task_that_is_not_running() -> None:
    result = runner.invoke(
        app,
        ["agent-mode", "answer", "task-001", "yes", "-s", "0b0d2e4c-1f0e-4a39-9a4e-1c2d3e4f5a6b"],
    )
    assert result.exit_code == 1
    assert "0b0d2e4c-1f0e-4a39-9a4e-1c2d3e4f5a6b" in result.stderr


def test_a_cli_that_cannot_be_started_is_refused_before_planning(
    openai_fake: FakeLlmServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning costs a model call and stores a session: `other` without --command, or a
    CLI that is not installed, is refused first."""
    repo = make_repo(tmp_path / "repo")
    openai_fake.reply(CHAT, Reply(json=completion({"content": json.dumps(PLAN)})))
    result = runner.invoke(app, ["agent-mode", "start", str(repo), "x", "--cli", "other", "--yes"])
    assert result.exit_code == 1
    assert "the `other` CLI needs --command" in result.stderr
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no gemini anywhere
    monkeypatch.setattr("opencrab.agentmode.runner.CLIS_BIN", tmp_path / "none")
    result = runner.invoke(app, ["agent-mode", "start", str(repo), "x", "--cli", "gemini", "-y"])
    assert result.exit_code == 1
    assert "'gemini' is not installed" in result.stderr
    assert openai_fake.requests == []  # no plan asked for
    assert json.loads(ok("agent-mode", "status", "--json")) == []  # no session stored


def test_start_without_a_terminal_and_without_yes_says_to_use_yes(
    openai_fake: FakeLlmServer, tmp_path: Path
) -> None:
    """Nobody can answer "Start these tasks?" without a terminal: the command says to use
    --yes (not a bare "Aborted."), before a plan is paid for or a session stored."""
    repo = make_repo(tmp_path / "repo")
    openai_fake.reply(CHAT, Reply(json=completion({"content": json.dumps(PLAN)})))
    command = shlex.join(write_scripts(tmp_path / "scripts", {"task-001": []}))
    result = runner.invoke(
        app, ["agent-mode", "start", str(repo), "x", "--cli", "other", "--command", command]
    )
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "Aborted" not in result.stdout + result.stderr
    assert "--yes" in result.stderr
    assert openai_fake.requests == []  # no plan asked for
    assert json.loads(ok("agent-mode", "status", "--json")) == []  # no session stored


def test_a_cli_whose_provider_has_no_key_is_refused_before_planning(
    openai_fake: FakeLlmServer, tmp_path: Path
) -> None:
    """Claude Code talks to OpenCrab's anthropic provider: with no key for it (neither
    stored through the dashboard nor in the config or ANTHROPIC_API_KEY) nothing is
    planned, and the error says where to set one."""
    repo = make_repo(tmp_path / "repo")
    openai_fake.reply(CHAT, Reply(json=completion({"content": json.dumps(PLAN)})))
    result = runner.invoke(app, ["agent-mode", "start", str(repo), "x", "--cli", "claude", "-y"])
    assert result.exit_code == 1
    assert "ClaudeCode needs an API key for anthropic" in result.stderr
    assert "[llm.providers.anthropic] api_key" in result.stderr
    assert openai_fake.requests == []  # no plan asked for
    assert json.loads(ok("agent-mode", "status", "--json")) == []  # no session stored
