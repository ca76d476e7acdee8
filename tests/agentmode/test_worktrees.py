"""Git worktrees for sub-agents, with real git repositories."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from opencrab.agentmode.worktrees import (
    CleanupRefused,
    MergeConflict,
    create_worktree,
    disk_usage,
    find_orphans,
    list_worktrees,
    prune,
    remove_worktree,
    worktree_diff,
    worktree_missing,
    worktree_path,
    worktrees_disk_usage,
)


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    sh(root, "config", "user.email", "dev@example.com")
    sh(root, "config", "user.name", "Dev")
    (root / "app.py").write_text("print('hello')\n")
    (root / "README.md").write_text("# app\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-qm", "start")
    return root


def commit(path: Path, name: str, text: str, message: str) -> None:
    (path / name).write_text(text, "utf-8")
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", message)


async def test_a_worktree_is_made_on_a_new_branch_and_excluded_once(repo: Path) -> None:
    wt = await create_worktree(repo, "agent/jwt-auth", "main")
    assert wt.path == repo / ".worktrees" / "agent-jwt-auth"
    assert sh(wt.path, "branch", "--show-current").strip() == "agent/jwt-auth"
    assert (wt.path / "app.py").read_text() == "print('hello')\n"
    await create_worktree(repo, "agent/second", "main")
    exclude = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count(".worktrees/") == 1
    assert sh(repo, "status", "--porcelain") == ""  # the main checkout sees nothing


async def test_parallel_creations_are_serialised_per_repository(repo: Path) -> None:
    branches = [f"agent/task-{i:03d}" for i in range(8)]
    made = await asyncio.gather(*(create_worktree(repo, b, "main") for b in branches))
    assert [w.branch for w in made] == branches
    listed = {e.branch for e in await list_worktrees(repo)}
    assert listed == {"main", *branches}


async def test_a_dependent_task_starts_from_its_dependencies_merged(repo: Path) -> None:
    a = await create_worktree(repo, "agent/a", "main")
    b = await create_worktree(repo, "agent/b", "main")
    commit(a.path, "a.txt", "from a\n", "a")
    commit(b.path, "b.txt", "from b 日本\n", "b")
    c = await create_worktree(repo, "agent/c", "main", merge=["agent/a", "agent/b"])
    assert (c.path / "a.txt").read_text() == "from a\n"
    assert (c.path / "b.txt").read_text() == "from b 日本\n"
    assert sh(c.path, "status", "--porcelain") == ""


async def test_a_conflicting_dependency_is_named_and_the_worktree_left_clean(
    repo: Path,
) -> None:
    a = await create_worktree(repo, "agent/a", "main")
    b = await create_worktree(repo, "agent/b", "main")
    commit(a.path, "app.py", "print('a')\n", "a")
    commit(b.path, "app.py", "print('b')\n", "b")
    with pytest.raises(MergeConflict) as caught:
        await create_worktree(repo, "agent/c", "main", merge=["agent/a", "agent/b"])
    assert caught.value.branch == "agent/c"
    assert caught.value.dependency == "agent/b"
    assert caught.value.files == ["app.py"]
    assert "agent/b" in str(caught.value)
    assert "agent/c" in str(caught.value)
    path = worktree_path(repo, "agent/c")
    assert sh(path, "status", "--porcelain") == ""
    assert (path / "app.py").read_text() == "print('a')\n"


async def test_merges_work_without_a_configured_identity(tmp_path: Path, repo: Path) -> None:
    sh(repo, "config", "--unset", "user.email")
    sh(repo, "config", "--unset", "user.name")
    a = await create_worktree(repo, "agent/a", "main")
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@y",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "a",
        ],
        cwd=a.path,
        check=True,
    )
    c = await create_worktree(repo, "agent/c", "main", merge=["agent/a"])
    assert "Merge agent/a into agent/c" in sh(c.path, "log", "-1", "--format=%s")


async def test_the_diff_counts_commits_edits_and_new_files(repo: Path) -> None:
    wt = await create_worktree(repo, "agent/x", "main")
    commit(wt.path, "committed.py", "x = 1\n", "one")
    (wt.path / "app.py").write_text("print('changed')\nprint('more')\n")
    (wt.path / "新しい.txt").write_text("未追跡\n", "utf-8")
    index_before = (repo / ".git" / "worktrees" / "agent-x" / "index").read_bytes()
    diff = await worktree_diff(wt.path, "main")
    assert diff.files_changed == 3
    assert (diff.insertions, diff.deletions) == (4, 1)
    assert "committed.py" in diff.stat
    assert "+print('more')" in diff.patch
    assert "+未追跡" in diff.patch
    assert not diff.truncated
    # the worktree's own index is untouched: the new file is still untracked
    assert (repo / ".git" / "worktrees" / "agent-x" / "index").read_bytes() == index_before
    assert "?? " in sh(wt.path, "status", "--porcelain")
    big = await worktree_diff(wt.path, "main", max_bytes=100)
    assert big.truncated
    assert len(big.patch.encode()) <= 100
    assert big.files_changed == 3


async def test_disk_use_is_measured_per_worktree(repo: Path) -> None:
    wt = await create_worktree(repo, "agent/big", "main")
    (wt.path / "blob.bin").write_bytes(os.urandom(300_000))
    os.link(wt.path / "blob.bin", wt.path / "same.bin")  # a hard link counts once
    used = await worktrees_disk_usage(repo)
    assert set(used) == {wt.path}
    assert 300_000 <= used[wt.path] < 600_000
    assert disk_usage(wt.path) == used[wt.path]


async def test_cleanup_refuses_unmerged_unpushed_or_dirty_work(repo: Path) -> None:
    wt = await create_worktree(repo, "agent/work", "main")
    commit(wt.path, "feature.py", "x = 1\n", "feature")
    with pytest.raises(CleanupRefused, match="not merged into main"):
        await remove_worktree(repo, "agent/work", "main")
    assert wt.path.is_dir()

    sh(repo, "merge", "-q", "--no-ff", "-m", "merge", "agent/work")
    (wt.path / "scratch.txt").write_text("not committed\n")
    with pytest.raises(CleanupRefused, match="uncommitted"):
        await remove_worktree(repo, "agent/work", "main")

    (wt.path / "scratch.txt").unlink()
    await remove_worktree(repo, "agent/work", "main")
    assert not wt.path.exists()
    assert "agent/work" not in sh(repo, "branch", "--list")


async def test_cleanup_accepts_a_branch_pushed_to_its_upstream(tmp_path: Path, repo: Path) -> None:
    remote = tmp_path / "remote.git"
    sh(tmp_path, "init", "-q", "--bare", str(remote))
    sh(repo, "remote", "add", "origin", str(remote))
    wt = await create_worktree(repo, "agent/pushed", "main")
    commit(wt.path, "f.py", "y = 2\n", "f")
    sh(wt.path, "push", "-q", "-u", "origin", "agent/pushed")
    await remove_worktree(repo, "agent/pushed", "main")
    assert not wt.path.exists()

    unpushed = await create_worktree(repo, "agent/later", "main")
    commit(unpushed.path, "g.py", "z = 3\n", "g")
    sh(unpushed.path, "push", "-q", "-u", "origin", "agent/later")
    commit(unpushed.path, "h.py", "w = 4\n", "h")  # a commit the remote lacks
    with pytest.raises(CleanupRefused, match="nor pushed to origin/agent/later"):
        await remove_worktree(repo, "agent/later", "main")
    await remove_worktree(repo, "agent/later", "main", force=True)
    assert not unpushed.path.exists()


async def test_orphans_stray_dirs_and_stale_entries_are_found(repo: Path) -> None:
    await create_worktree(repo, "agent/known", "main")
    lost = await create_worktree(repo, "agent/lost", "main")
    gone = await create_worktree(repo, "agent/gone", "main")
    stray = repo / ".worktrees" / "leftover"
    stray.mkdir()
    (stray / "junk").write_text("x")
    subprocess.run(["rm", "-rf", str(gone.path)], check=True)

    orphans = await find_orphans(repo, {"agent/known", "agent/gone"})
    assert [e.branch for e in orphans.worktrees] == ["agent/lost"]
    assert orphans.worktrees[0].path == lost.path
    assert orphans.stray_dirs == [stray]
    assert [e.branch for e in orphans.prunable] == ["agent/gone"]

    await prune(repo)
    assert (await find_orphans(repo, {"agent/known"})).prunable == []


async def test_a_gone_worktree_is_detected(repo: Path) -> None:
    wt = await create_worktree(repo, "agent/here", "main")
    assert await worktree_missing(repo, "agent/here") is None
    subprocess.run(["rm", "-rf", str(wt.path)], check=True)
    reason = await worktree_missing(repo, "agent/here")
    assert reason is not None
    assert "gone" in reason
