"""Agent-mode benchmark: worktree creation, completion delay, the orchestrator's CPU.

A repository with `--files` files (one commit) gets `--count` worktrees made by
`opencrab.agentmode.worktrees.create_worktree` (the repository lock, the exclude file,
`git worktree add -b`) and `--count` made by a bare `git worktree add -b` subprocess, in
the same run, alternating, so machine noise hits both alike. Printed: the median time of
each and their ratio (what OpenCrab's bookkeeping costs on top of git's own work).

Completion delay: `--tasks` (20) scripted `other` sub-agents run by the real runner
(real tmux, real git, polling every 200 ms); half finish by exiting, half by a Stop hook
(then wait at their "prompt" till the runner ends them). The delay is from the moment
the sub-agent finished (its own clock just before exit; the hook's record time) to the
task's `completed_at` (after its commit, diff and delivery): p50 and p95, target < 1 s.

Orchestrator CPU: 8 tasks running at once (sleeping sub-agents), the runner process's
own CPU time plus that of its git / tmux children over a window while all 8 run, as a
share of one core.

    python bench/agent_mode.py [--files 2000] [--count 10] [--tasks 20] [--parallel 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from opencrab.agentmode.worktrees import create_worktree

BENCH_DIR = Path(__file__).resolve().parent
SCRIPTED = BENCH_DIR.parent / "tests" / "fakes" / "scripted_agent.py"


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


def _runner(tmp: Path, parallel: int) -> tuple[Any, Any]:
    """A runner over a fresh SQLite store and sessions dir, on a private tmux server."""
    from opencrab.agentmode.files import SessionFiles
    from opencrab.agentmode.runner import AgentModeRunner
    from opencrab.agentmode.service import AgentModeService
    from opencrab.agentmode.tmux import TmuxServer
    from opencrab.config import load_settings
    from opencrab.store import Database

    settings = load_settings()
    settings.agent_mode.parallelism = parallel
    db = Database(f"sqlite:///{tmp / 'bench.db'}")
    db.upgrade()
    service = AgentModeService(settings, db, SessionFiles(tmp / "sessions"))
    tmux = TmuxServer(f"oc-bench-{uuid.uuid4().hex[:8]}")
    return AgentModeRunner(service, tmux, data_dir=tmp / "data", search=()), db


def _session(runner: Any, repo: Path, count: int) -> str:
    from opencrab.agentmode.model import (
        AgentSession,
        Conversation,
        SessionId,
        SessionStatus,
        utcnow,
    )
    from opencrab.agentmode.service import tasks_from_plan
    from opencrab.agentmode.validation import PlannedTask

    now = utcnow()
    plan = [PlannedTask(f"task-{n:03d}", f"job {n}", "") for n in range(1, count + 1)]
    session = AgentSession(
        id=SessionId(str(uuid.uuid4())),
        created_at=now,
        updated_at=now,
        status=SessionStatus.ACTIVE,
        repository_path=repo,
        conversation=Conversation(),
        tasks=tasks_from_plan(plan, now),
        worktrees=[],
    )
    runner.service.save(session)
    return session.id


def _scripts(folder: Path, steps: dict[str, list[dict[str, Any]]]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for task_id, script in steps.items():
        (folder / f"{task_id}.json").write_text(json.dumps(script))
    return [sys.executable, str(SCRIPTED), str(folder)]


async def completion_delays(tmp: Path, count: int) -> tuple[list[float], list[float]]:
    """Seconds from each sub-agent's finish to its task's completed_at: (exit, hook)."""
    from opencrab.agentmode.signals import read_signals

    repo = tmp / "delay-repo"
    make_repo(repo, 20)
    runner, db = _runner(tmp, parallel=4)
    session_id = _session(runner, repo, count)
    stop = {"hook_event_name": "Stop", "last_assistant_message": "done"}
    steps: dict[str, list[dict[str, Any]]] = {}
    for n in range(1, count + 1):
        task_id = f"task-{n:03d}"
        mark = str(tmp / f"finished-{task_id}")
        work = [{"write": "out.txt", "content": task_id}, {"sleep": 0.3}]
        if n % 2:
            steps[task_id] = [*work, {"time_to": mark}]
        else:
            steps[task_id] = [*work, {"signal": stop}, {"sleep": 600}]
    try:
        await runner.start(session_id, "other", _scripts(tmp / "scripts", steps))
        session = await runner.wait(session_id)
        by_exit: list[float] = []
        by_hook: list[float] = []
        for task in session.tasks:
            assert task.completed_at is not None, task
            done = task.completed_at.timestamp()
            mark_file = tmp / f"finished-{task.id}"
            if mark_file.exists():
                by_exit.append(done - float(mark_file.read_text()))
            else:
                found, _ = read_signals(runner.runs.task_dir(session_id, task.id) / "signals")
                by_hook.append(done - next(s.at for s in found if s.event == "Stop"))
        return by_exit, by_hook
    finally:
        await runner.close()
        await runner.tmux.kill_server()
        db.close()


async def orchestrator_cpu(tmp: Path, parallel: int, window: float) -> float:
    """The runner's CPU (its process and its git / tmux children) over `window` seconds
    while `parallel` sub-agents run, as a share of one core."""
    from opencrab.agentmode.model import TaskStatus

    repo = tmp / "cpu-repo"
    make_repo(repo, 20)
    runner, db = _runner(tmp, parallel=parallel)
    session_id = _session(runner, repo, parallel)
    steps = {f"task-{n:03d}": [{"sleep": window + 30}] for n in range(1, parallel + 1)}
    try:
        await runner.start(session_id, "other", _scripts(tmp / "cpu-scripts", steps))
        while runner.service.get(session_id).task_counts()[TaskStatus.RUNNING] < parallel:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # past the start-up work
        before = _cpu()
        started = time.perf_counter()
        await asyncio.sleep(window)
        used = _cpu() - before
        share = used / (time.perf_counter() - started)
        await runner.cancel(session_id)
        return share
    finally:
        await runner.close()
        await runner.tmux.kill_server()
        db.close()


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    """Run the three parts and print their results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--window", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opencrab-bench-am-") as tmp:
        os.environ.setdefault("OPENCRAB_HOME", str(Path(tmp) / "home"))
        by_exit, by_hook = asyncio.run(completion_delays(Path(tmp), args.tasks))
        delays = by_exit + by_hook
        print(f"completion delay, {len(delays)} tasks (finish -> Completed):")
        for label, values in (("exit", by_exit), ("hook", by_hook), ("all", delays)):
            p50, p95 = _pct(values, 0.5), _pct(values, 0.95)
            print(f"  {label:<5} p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms")
        print(f"  target p95 < 1000 ms: {'met' if _pct(delays, 0.95) < 1.0 else 'MISSED'}")
        share = asyncio.run(orchestrator_cpu(Path(tmp), args.parallel, args.window))
        print(f"orchestrator CPU with {args.parallel} tasks running: {share * 100:.1f}% of a core")
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
