"""Cleanup after a session ended badly (issue 32): after `cancel` it never tracebacks on
panes that are already gone, and a failed task's worktree can be cleaned."""

from __future__ import annotations

from pathlib import Path

from opencrab.agentmode.model import TaskStatus
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.store import Database
from tests.agentmode.runner_support import (
    make_repo,
    make_runner,
    make_session,
    sh,
    until,
    write_scripts,
)


async def test_cleanup_after_cancel_removes_the_worktrees_without_a_traceback(
    settings: Settings, db: Database, tmp_path: Path, tmux_server: TmuxServer
) -> None:
    repo = make_repo(tmp_path / "repo")
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [PlannedTask("task-001", "a", ""), PlannedTask("task-002", "b", "")]
    session_id = make_session(runner.service, repo, plan)
    command = write_scripts(
        tmp_path / "scripts", {"task-001": [{"sleep": 600}], "task-002": [{"sleep": 600}]}
    )
    await runner.start(session_id, "other", command)

    def running() -> bool:
        session = runner.current(session_id)
        return session is not None and all(t.status is TaskStatus.RUNNING for t in session.tasks)

    await until(running, "both tasks running")
    cancelled = await runner.cancel(session_id)
    assert {t.status for t in cancelled.tasks} == {TaskStatus.CANCELLED}
    for task in cancelled.tasks:  # the panes are gone before cleanup looks at them
        assert task.sub_agent is not None
        await tmux_server.run("kill-pane", "-t", task.sub_agent.pane_id, check=False)

    report = await runner.cleanup(session_id, orphans=True)

    assert sorted(report.removed) == sorted(w.branch_name for w in cancelled.worktrees)
    assert report.refused == {}
    assert not list((repo / ".worktrees").glob("agent-*"))
    assert sh(repo, "branch", "--list", "agent/*") == ""


async def test_a_failed_sessions_worktree_can_be_cleaned(
    settings: Settings, db: Database, tmp_path: Path, tmux_server: TmuxServer
) -> None:
    """task-003 merges two branches that changed the same file: its worktree is made, the
    merge conflicts, the task fails before a sub-agent starts and the session is Failed.
    Cleanup knows that worktree as the session's (not an orphan to look for)."""
    repo = make_repo(tmp_path / "repo")
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [
        PlannedTask("task-001", "one", ""),
        PlannedTask("task-002", "two", ""),
        PlannedTask("task-003", "both", "", dependencies=["task-001", "task-002"]),
    ]
    session_id = make_session(runner.service, repo, plan)
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [{"write": "same.txt", "content": "one"}],
            "task-002": [{"write": "same.txt", "content": "two"}],
            "task-003": [],
        },
    )
    await runner.start(session_id, "other", command)
    session = await runner.wait(session_id)
    assert session.status.value == "Failed"
    failed = session.task("task-003")
    assert failed is not None
    assert failed.status is TaskStatus.FAILED
    assert failed.result is not None
    assert "conflict" in (failed.result.error or "")
    branch = runner.run_state(session_id).branches["task-003"]  # type: ignore[union-attr]
    assert (repo / ".worktrees" / branch.replace("/", "-")).is_dir()

    report = await runner.cleanup(session_id, force=True)

    assert branch in report.removed
    assert report.orphan_worktrees == []
    assert not list((repo / ".worktrees").glob("agent-*"))
    assert sh(repo, "branch", "--list", "agent/*") == ""
