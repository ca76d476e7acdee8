"""The runner over real git, real tmux (a private server) and the scripted `other`
sub-agent: DAG order, parallelism, Shared worktrees, failures and retry, waiting input
answered, cancel, resume after a restart, delivery (pull request or local branch)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from opencrab.agentmode.model import (
    CompletionSource,
    SessionStatus,
    SubAgentStatus,
    TaskStatus,
    WorktreeStrategy,
)
from opencrab.agentmode.tmux import TmuxServer, process_tree
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
from tests.fakes.private_tmux import alive

SHARED = WorktreeStrategy.SHARED


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


async def test_a_diamond_runs_in_dependency_order_with_merged_and_shared_worktrees(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [
        PlannedTask("task-001", "base", "write a"),
        PlannedTask("task-002", "left", "write b", ("task-001",)),
        PlannedTask("task-003", "right", "write c", ("task-001",), SHARED),
        PlannedTask("task-004", "top", "write d", ("task-002", "task-003")),
    ]
    session_id = make_session(runner.service, repo, plan)
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [{"write": "a.txt", "content": "a"}],
            "task-002": [{"write": "b.txt", "content": "b"}],
            "task-003": [
                {"write": "c.txt", "content": "c"},
                {"env_to": "../prompt-003.json", "names": ["OPENCRAB_TASK_PROMPT"]},
            ],
            "task-004": [{"write": "d.txt", "content": "d"}],
        },
    )

    await runner.start(session_id, "other", command)
    session = await runner.wait(session_id)

    assert session.status is SessionStatus.COMPLETED
    tasks = {t.id: t for t in session.tasks}
    assert {t.status for t in tasks.values()} == {TaskStatus.COMPLETED}
    first, left, right, top = (tasks[f"task-00{n}"] for n in range(1, 5))
    for task in tasks.values():
        assert task.started_at is not None
        assert task.completed_at is not None
        assert task.sub_agent is not None
        assert task.sub_agent.status is SubAgentStatus.COMPLETED
        assert task.sub_agent.completion_source is CompletionSource.PROCESS_EXIT
        assert task.sub_agent.pid > 0
        assert task.sub_agent.pane_id.startswith("%")
    assert first.completed_at is not None
    assert left.started_at is not None
    assert right.started_at is not None
    assert left.started_at >= first.completed_at
    assert right.started_at >= first.completed_at
    assert top.started_at is not None
    assert left.completed_at is not None
    assert right.completed_at is not None
    assert top.started_at >= max(left.completed_at, right.completed_at)
    # Shared: task-003 worked in task-001's worktree, on its branch
    assert first.assigned_worktree is not None
    assert right.assigned_worktree is not None
    assert right.assigned_worktree.path == first.assigned_worktree.path
    shared = first.assigned_worktree.path
    assert (shared / "c.txt").read_text() == "c"
    assert [w.task_ids for w in session.worktrees if w.path == shared] == [["task-001", "task-003"]]
    # New with dependencies: started from their merged branches
    assert left.assigned_worktree is not None
    assert (left.assigned_worktree.path / "a.txt").read_text() == "a"
    assert top.assigned_worktree is not None
    top_files = sorted(p.name for p in top.assigned_worktree.path.glob("*.txt"))
    assert top_files == ["a.txt", "b.txt", "c.txt", "d.txt"]
    # the prompt reached the `other` program (environment, never pasted as input)
    prompt = json.loads((shared.parent / "prompt-003.json").read_text())
    assert prompt["OPENCRAB_TASK_PROMPT"].startswith("right\n\nwrite c")
    # results: the diff against the start branch, local branch (no gh here)
    state = runner.run_state(session_id)
    assert state is not None
    outcome = state.outcomes["task-004"]
    assert outcome.files_changed == 4
    assert outcome.delivery.startswith(f"local branch {outcome.branch} (")
    assert top.result is not None
    assert top.result.success
    assert top.result.pull_request is None
    assert outcome.patch_file is not None
    assert "+d" in Path(outcome.patch_file).read_text()


async def test_no_more_than_parallelism_tasks_run_at_once(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    settings.agent_mode.parallelism = 2
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [PlannedTask(f"task-00{n}", f"job {n}", "") for n in range(1, 5)]
    session_id = make_session(runner.service, repo, plan)
    log = tmp_path / "log"
    scripts = {
        f"task-00{n}": [{"pid_to": str(log / f"task-00{n}")}, {"sleep": 0.5}] for n in range(1, 5)
    }
    log.mkdir()
    command = write_scripts(tmp_path / "scripts", scripts)
    await runner.start(session_id, "other", command)
    await runner.close()  # drive the steps by hand below

    await runner.step(session_id)
    await runner.settled(session_id)
    session = runner.service.get(session_id)
    counts = session.task_counts()
    assert counts[TaskStatus.RUNNING] == 2
    assert counts[TaskStatus.READY] == 2
    peak = 0
    while await runner.step(session_id):
        await runner.settled(session_id)
        await asyncio.sleep(0.05)
        session = runner.service.get(session_id)
        peak = max(peak, session.task_counts()[TaskStatus.RUNNING])
    session = runner.service.get(session_id)
    assert session.status is SessionStatus.COMPLETED
    assert peak <= 2
    assert sorted(p.name for p in log.iterdir()) == [f"task-00{n}" for n in range(1, 5)]


async def test_two_sessions_on_one_repository_never_share_a_branch(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [
        PlannedTask("task-001", "first", ""),
        PlannedTask("task-002", "second", "", ("task-001",)),
    ]
    sessions = [make_session(runner.service, repo, plan) for _ in range(2)]
    command = write_scripts(
        tmp_path / "scripts",
        {"task-001": [{"sleep": 0.3}], "task-002": [{"write": "b.txt", "content": "b"}]},
    )

    # started together: the second is planned before the first made any branch
    await asyncio.gather(*(runner.start(s, "other", command) for s in sessions))
    done = [await runner.wait(s) for s in sessions]

    assert [s.status for s in done] == [SessionStatus.COMPLETED] * 2
    branches = [runner.run_state(s).branches for s in sessions]  # type: ignore[union-attr]
    assert not set(branches[0].values()) & set(branches[1].values()), branches
    assert len({b for named in branches for b in named.values()}) == 4


async def test_a_failed_task_keeps_its_dependants_pending_until_it_is_retried(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [
        PlannedTask("task-001", "base", ""),
        PlannedTask("task-002", "after", "", ("task-001",)),
    ]
    session_id = make_session(runner.service, repo, plan)
    scripts = tmp_path / "scripts"
    command = write_scripts(
        scripts,
        {
            "task-001": [{"print": "broken"}, {"exit": 3}],
            "task-002": [{"write": "b", "content": ""}],
        },
    )
    await runner.start(session_id, "other", command)
    session = await runner.wait(session_id)

    assert session.status is SessionStatus.FAILED
    failed, waiting = session.tasks
    assert failed.status is TaskStatus.FAILED
    assert failed.result is not None
    assert failed.result.error == "the sub-agent exited with status 3"
    assert failed.sub_agent is not None
    assert failed.sub_agent.status is SubAgentStatus.ERROR
    assert waiting.status is TaskStatus.PENDING
    assert waiting.sub_agent is None

    write_scripts(scripts, {"task-001": [{"write": "a", "content": ""}]})
    await runner.retry(session_id, "task-001")
    session = await runner.wait(session_id)
    assert session.status is SessionStatus.COMPLETED
    assert [t.status for t in session.tasks] == [TaskStatus.COMPLETED, TaskStatus.COMPLETED]


async def test_a_question_is_shown_and_the_answer_reaches_the_pane(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "ask", "")])
    answer_file = tmp_path / "answer.txt"
    question = {
        "hook_event_name": "Notification",
        "notification_type": "permission_prompt",
        "message": "Create hello.txt?",
    }
    stop = {"hook_event_name": "Stop", "last_assistant_message": "Created hello.txt."}
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [
                {"signal": question},
                {"ask": "Create hello.txt?", "answer_to": str(answer_file)},
                {"write": "hello.txt", "content": "hi"},
                {"signal": stop},
                {"sleep": 600},
            ]
        },
    )
    await runner.start(session_id, "other", command)

    def asking() -> str | None:
        state = runner.run_state(session_id)
        return None if state is None else state.questions.get("task-001")

    assert await until(asking, "the question") == "Create hello.txt?"
    task = runner.service.get(session_id).tasks[0]
    assert task.sub_agent is not None
    assert task.sub_agent.status is SubAgentStatus.WAITING_INPUT
    assert "Create hello.txt?" in await runner.output(session_id, "task-001")

    await runner.answer(session_id, "task-001", "yes, 日本語 too")
    session = await runner.wait(session_id)

    assert answer_file.read_text() == "yes, 日本語 too"
    done = session.tasks[0]
    assert done.status is TaskStatus.COMPLETED
    assert done.result is not None
    assert done.result.summary == "Created hello.txt."
    assert done.sub_agent is not None
    assert done.sub_agent.completion_source is CompletionSource.HOOK
    assert not alive(done.sub_agent.pid)  # the CLI waiting at its prompt was ended
    state = runner.run_state(session_id)
    assert state is not None
    assert state.questions == {}


async def test_cancel_ends_every_process_of_the_panes(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [
        PlannedTask("task-001", "busy", ""),
        PlannedTask("task-002", "later", "", ("task-001",)),
    ]
    session_id = make_session(runner.service, repo, plan)
    command = write_scripts(
        tmp_path / "scripts",
        {"task-001": [{"spawn": 2, "depth": 2}, {"sleep": 600}], "task-002": []},
    )
    await runner.start(session_id, "other", command)

    def tree() -> set[int]:
        task = runner.service.get(session_id).tasks[0]
        pids = process_tree(task.sub_agent.pid) if task.sub_agent else set()
        return pids if len(pids) >= 5 else set()

    pids = await until(tree, "the sub-agent's process tree")
    session = await runner.cancel(session_id)

    assert [t.status for t in session.tasks] == [TaskStatus.CANCELLED, TaskStatus.CANCELLED]
    assert session.status is SessionStatus.FAILED
    assert not [p for p in pids if alive(p)]


async def test_resume_after_a_restart_reattaches_live_panes_and_fails_lost_ones(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    first = make_runner(settings, db, tmp_path, tmux_server)
    plan = [PlannedTask("task-001", "survives", ""), PlannedTask("task-002", "lost", "")]
    session_id = make_session(first.service, repo, plan)
    go = tmp_path / "go"
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [{"ask": "ready?", "answer_to": str(go)}, {"write": "x", "content": "1"}],
            "task-002": [{"sleep": 600}],
        },
    )
    await first.start(session_id, "other", command)

    def running() -> bool:
        return first.service.get(session_id).task_counts()[TaskStatus.RUNNING] == 2

    await until(running, "both tasks running")
    await first.pause(session_id)
    lost = first.service.get(session_id).tasks[1].sub_agent
    assert lost is not None
    await first.close()  # the process ends; the panes live on
    await tmux_server.kill_pane(lost.pane_id)  # … but one dies while nobody watches

    second = make_runner(settings, db, tmp_path, TmuxServer(tmux_server.socket))
    assert second.service.get(session_id).status is SessionStatus.PAUSED
    resumed = await second.resume(session_id)
    assert resumed.status is SessionStatus.ACTIVE
    survivor = resumed.tasks[0].sub_agent
    assert survivor is not None
    await tmux_server.send_text(survivor.pane_id, "go")
    session = await second.wait(session_id)

    kept, gone = session.tasks
    assert kept.status is TaskStatus.COMPLETED
    assert gone.status is TaskStatus.FAILED
    assert gone.result is not None
    assert gone.result.error is not None
    assert "pane is gone" in gone.result.error
    assert session.status is SessionStatus.FAILED
    assert go.read_text() == "go"


async def test_resume_fails_a_running_task_whose_worktree_is_gone(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    first = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(first.service, repo, [PlannedTask("task-001", "work", "")])
    command = write_scripts(tmp_path / "scripts", {"task-001": [{"sleep": 600}]})
    await first.start(session_id, "other", command)
    await until(
        lambda: first.service.get(session_id).tasks[0].status is TaskStatus.RUNNING, "running"
    )
    await first.close()
    task = first.service.get(session_id).tasks[0]
    assert task.assigned_worktree is not None
    sh(repo, "worktree", "remove", "--force", str(task.assigned_worktree.path))

    second = make_runner(settings, db, tmp_path, TmuxServer(tmux_server.socket))
    await second.resume(session_id)
    session = await second.wait(session_id)

    failed = session.tasks[0]
    assert failed.status is TaskStatus.FAILED
    assert failed.result is not None
    assert failed.result.error is not None
    assert "is gone" in failed.result.error
    assert failed.sub_agent is not None
    assert not alive(failed.sub_agent.pid)


async def test_cleanup_refuses_unmerged_work_and_offers_orphans(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "feature", "")])
    command = write_scripts(
        tmp_path / "scripts", {"task-001": [{"write": "f.txt", "content": "f"}]}
    )
    await runner.start(session_id, "other", command)
    session = await runner.wait(session_id)
    worktree = session.worktrees[0]
    stray = await tmux_server.open_pane(
        ["sleep", "600"], cwd=tmp_path, labels={"session": "crashed", "task": "task-009"}
    )

    report = await runner.cleanup(session_id)

    assert report.removed == []
    assert "not merged into main" in report.refused[worktree.branch_name]
    assert worktree.path.is_dir()
    assert stray.pane_id in report.orphan_panes
    assert alive(stray.pid)  # only offered
    assert sum(report.disk_bytes.values()) > 0

    sh(repo, "merge", "-q", "--no-edit", worktree.branch_name)
    report = await runner.cleanup(session_id, orphans=True)

    assert report.removed == [worktree.branch_name]
    assert not worktree.path.exists()
    assert sh(repo, "branch", "--list", worktree.branch_name) == ""
    assert runner.service.get(session_id).worktrees == []
    assert not alive(stray.pid)


async def test_a_pull_request_is_opened_with_gh_when_a_remote_exists(
    settings: Settings,
    db: Database,
    tmp_path: Path,
    repo: Path,
    tmux_server: TmuxServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    sh(repo, "remote", "add", "origin", str(remote))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "gh-argv.json"
    gh = bin_dir / "gh"
    gh.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {calls}\necho "https://github.com/owner/repo/pull/42"\n'
    )
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    runner = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "feature", "")])
    stop = {"hook_event_name": "Stop", "last_assistant_message": "Added f.txt"}
    command = write_scripts(
        tmp_path / "scripts",
        {"task-001": [{"write": "f.txt", "content": "f"}, {"signal": stop}]},
    )
    await runner.start(session_id, "other", command)
    session = await runner.wait(session_id)

    result = session.tasks[0].result
    assert result is not None
    assert result.pull_request is not None
    assert (result.pull_request.number, result.pull_request.url) == (
        42,
        "https://github.com/owner/repo/pull/42",
    )
    branch = session.worktrees[0].branch_name
    assert calls.read_text().splitlines() == [
        "pr",
        "create",
        "--head",
        branch,
        "--base",
        "main",
        "--title",
        "feature",
        "--body",
        "Added f.txt",
    ]
    assert sh(remote, "branch", "--list", branch).strip() == branch
