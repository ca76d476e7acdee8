"""Agent-mode benchmark, part 1: worktree creation against a plain `git worktree add`.

A repository with `--files` files (one commit) gets `--count` worktrees made by
`opencrab.agentmode.worktrees.create_worktree` (the repository lock, the exclude file,
`git worktree add -b`) and `--count` made by a bare `git worktree add -b` subprocess, in
the same run, alternating, so machine noise hits both alike. Printed: the median time of
each and their ratio (what OpenCrab's bookkeeping costs on top of git's own work).

The completion-detection part (finish → `Completed`, p50/p95 over 20 tasks) and the
orchestrator's CPU with 8 parallel tasks come with the orchestrator.

    python bench/agent_mode.py [--files 2000] [--count 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from opencrab.agentmode.worktrees import create_worktree


def make_repo(root: Path, files: int) -> None:
    """A repository with `files` small files in nested folders, committed once."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    for i in range(files):
        folder = root / f"pkg{i % 40:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i:05d}.py").write_text(f"VALUE = {i}\n" * 20)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "start"],
        cwd=root,
        check=True,
    )


def plain_add(repo: Path, branch: str) -> float:
    """Seconds for a bare `git worktree add -b` of a new branch."""
    path = repo / ".plain" / branch.replace("/", "-")
    started = time.perf_counter()
    subprocess.run(
        ["git", "worktree", "add", "-q", "-b", branch, str(path), "main"], cwd=repo, check=True
    )
    return time.perf_counter() - started


async def ours(repo: Path, branch: str) -> float:
    """Seconds for create_worktree of a new branch."""
    started = time.perf_counter()
    await create_worktree(repo, branch, "main")
    return time.perf_counter() - started


def main() -> None:
    """Run both, alternating, and print the medians and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opencrab-bench-am-") as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, args.files)
        plain: list[float] = []
        mine: list[float] = []
        for i in range(args.count):
            plain.append(plain_add(repo, f"plain/task-{i:03d}"))
            mine.append(asyncio.run(ours(repo, f"agent/task-{i:03d}")))
    p, m = statistics.median(plain), statistics.median(mine)
    print(f"worktree creation, {args.files} files, median of {args.count}:")
    print(f"  git worktree add    {p * 1000:8.1f} ms")
    print(f"  create_worktree     {m * 1000:8.1f} ms")
    print(f"  ratio               {m / p:8.2f} x")


if __name__ == "__main__":
    main()
