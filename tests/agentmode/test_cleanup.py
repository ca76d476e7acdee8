"""Cleanup's orphans over real git and a private tmux server: only worktrees OpenCrab made
are ever orphans; a worktree the user made under `.worktrees/` is never listed nor
removed, even with `force` (issue 31, point 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.agentmode.worktrees import Orphans, create_worktree, find_orphans
from opencrab.config import Settings
from opencrab.store import Database
from tests.agentmode.runner_support import make_repo, make_runner, make_session, sh, write_scripts


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def users_worktree(repo: Path, name: str, branch: str) -> Path:
    """A worktree the user made under `.worktrees/` by hand, with uncommitted work in it."""
    path = repo / ".worktrees" / name
    sh(repo, "worktree", "add", "-q", "-b", branch, str(path))
    (path / "draft.py").write_text("precious = True\n")
    sh(path, "add", "draft.py")  # staged, not committed
    (path / "notes.txt").write_text("untracked too\n")
    return path


async def test_a_users_worktree_is_never_an_orphan_even_with_force(
    settings: Settings, db: Database, tmp_path: Path, repo: Path, tmux_server: TmuxServer
) -> None:
    runner = make_runner(settings, db, tmp_path, tmux_server)
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "feature", "")])
    command = write_scripts(
        tmp_path / "scripts", {"task-001": [{"write": "f.txt", "content": "f"}]}
    )
    await runner.start(session_id, "other", command)
    await runner.wait(session_id)
    # the user's own: one named as OpenCrab names its own (agent/…), one not
    lookalike = users_worktree(repo, "agent-mine", "agent/mine")
    plain = users_worktree(repo, "experiment", "experiment")
    # OpenCrab's own, that no session knows (a crash before the session was saved)
    lost = await create_worktree(repo, "agent/lost", "main")

    found = await runner.cleanup(session_id)
    assert found.orphan_worktrees == [str(lost.path)]

    report = await runner.cleanup(session_id, orphans=True, force=True)

    assert report.orphan_worktrees == [str(lost.path)]
    assert not lost.path.exists()
    assert sh(repo, "branch", "--list", "agent/lost") == ""
    for path in (lookalike, plain):
        assert (path / "draft.py").read_text() == "precious = True\n"
        assert (path / "notes.txt").read_text() == "untracked too\n"
    assert sh(repo, "branch", "--list", "agent/mine").strip() == "+ agent/mine"
    assert sh(repo, "branch", "--list", "experiment").strip() == "+ experiment"
    assert "draft.py" in sh(lookalike, "status", "--porcelain")


async def test_the_marker_lives_out_of_the_work_tree_and_a_recorded_branch_counts(
    repo: Path,
) -> None:
    ours = await create_worktree(repo, "agent/made", "main")
    assert sh(ours.path, "status", "--porcelain") == ""  # nothing to commit by mistake
    legacy = users_worktree(repo, "agent-legacy", "agent/legacy")  # made before markers

    orphans = await find_orphans(repo, known_branches=())
    assert [e.path for e in orphans.worktrees] == [ours.path]

    orphans = await find_orphans(repo, known_branches=(), recorded={"agent/legacy"})
    assert sorted(e.path for e in orphans.worktrees) == sorted([ours.path, legacy])
    assert await find_orphans(repo, known_branches={"agent/made"}) == Orphans()
