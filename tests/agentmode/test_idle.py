"""Seed 004's `Starting` status and `IdleTimeout` completion over real tmux: a sub-agent
is Starting until its CLI shows it is up, and a CLI that sends no signal completes once
its screen stays the same for `[agent_mode] idle_timeout_secs` (issue 32)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from opencrab.agentmode.model import CompletionSource, SubAgentStatus, TaskStatus
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings, load_settings
from opencrab.store import Database
from tests.agentmode.runner_support import (
    make_repo,
    make_runner,
    make_session,
    sh,
    until,
    write_scripts,
)


def statuses_seen(runner: AgentModeRunner, session_id: str) -> list[str]:
    """Every sub-agent status of task-001 the runner saved, in order (repeats dropped)."""
    seen: list[str] = []

    def changed(sid: str, task_id: str | None) -> None:
        session = runner.current(sid)
        task = session.task("task-001") if session is not None else None
        if task is not None and task.sub_agent is not None:
            status = task.sub_agent.status.value
            if not seen or seen[-1] != status:
                seen.append(status)

    runner.listeners.append(changed)
    return seen


async def test_a_silent_cli_starts_then_completes_by_idle_timeout(
    data_dir: Path,
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENCRAB_AGENT_MODE__IDLE_TIMEOUT_SECS", "2")
    settings: Settings = load_settings()  # the key as a user sets it (config / environment)
    assert settings.agent_mode.idle_timeout_secs == 2
    repo = make_repo(tmp_path / "repo")
    runner = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "quiet", "")])
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [
                {"sleep": 1.5},  # loading: nothing on its screen yet
                {"print": "ready"},
                {"write": "done.txt", "content": "done"},
                {"print": "all done, waiting at my prompt"},
                {"sleep": 600},  # never exits, never signals
            ]
        },
    )
    seen = statuses_seen(runner, session_id)
    await runner.start(session_id, "other", command)

    def finished() -> bool:
        session = runner.current(session_id)
        return session is not None and session.tasks[0].status is TaskStatus.COMPLETED

    await until(
        finished, "task-001 completed by IdleTimeout", timeout=120, describe=lambda: str(seen)
    )
    session = await runner.wait(session_id)
    task = session.tasks[0]
    assert task.sub_agent is not None
    assert task.sub_agent.completion_source is CompletionSource.IDLE_TIMEOUT
    assert seen[:2] == ["Starting", "Running"]
    assert seen[-1] == "Completed"
    assert session.status.value == "Completed"
    branch = task.assigned_worktree.branch_name if task.assigned_worktree else ""
    assert "done.txt" in sh(repo, "show", "--stat", branch)  # delivered: committed


async def test_idle_timeout_zero_never_completes_a_silent_cli(
    data_dir: Path, db: Database, tmp_path: Path, tmux_server: TmuxServer
) -> None:
    settings = load_settings()
    settings.agent_mode.idle_timeout_secs = 0
    repo = make_repo(tmp_path / "repo")
    runner = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "quiet", "")])
    command = write_scripts(
        tmp_path / "scripts", {"task-001": [{"print": "ready"}, {"sleep": 600}]}
    )
    seen = statuses_seen(runner, session_id)
    await runner.start(session_id, "other", command)
    await until(lambda: seen[-1:] == ["Running"], "task-001 running", describe=lambda: str(seen))
    await asyncio.sleep(4)  # twice as long as the other test's quiet time: still Running
    session = runner.current(session_id)
    assert session is not None
    assert session.tasks[0].sub_agent is not None
    assert session.tasks[0].sub_agent.status is SubAgentStatus.RUNNING
    await runner.cancel(session_id)
