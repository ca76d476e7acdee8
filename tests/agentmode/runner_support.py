"""Shared pieces of the runner tests: a git repository, a planned session, scripts for
the scripted `other` sub-agent, a runner over real tmux, and waiting for a state."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opencrab.agentmode.files import SessionFiles
from opencrab.agentmode.model import (
    AgentSession,
    Conversation,
    MessageRole,
    SessionId,
    SessionStatus,
    utcnow,
)
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.service import AgentModeService, tasks_from_plan
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.store import Database

SCRIPTED = Path(__file__).parents[1] / "fakes" / "scripted_agent.py"


def sh(cwd: Path, *args: str) -> str:
    """Run git in `cwd`; its stdout."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(root: Path) -> Path:
    """A git repository on `main` with one commit."""
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    sh(root, "config", "user.email", "dev@example.com")
    sh(root, "config", "user.name", "Dev")
    (root / "app.py").write_text("print('hello')\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-qm", "start")
    return root


def make_session(service: AgentModeService, repo: Path, plan: Sequence[PlannedTask]) -> str:
    """A planned session (Active, all Pending) saved through the service."""
    now = utcnow()
    conversation = Conversation()
    conversation.add(MessageRole.USER, "build the app", now)
    session = AgentSession(
        id=SessionId(str(uuid.uuid4())),
        created_at=now,
        updated_at=now,
        status=SessionStatus.ACTIVE,
        repository_path=repo,
        conversation=conversation,
        tasks=tasks_from_plan(plan, now),
        worktrees=[],
    )
    service.save(session)
    return session.id


def write_scripts(folder: Path, scripts: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One script per task id in `folder`; the `other` command that runs them."""
    folder.mkdir(parents=True, exist_ok=True)
    for task_id, steps in scripts.items():
        (folder / f"{task_id}.json").write_text(json.dumps(steps), encoding="utf-8")
    return [sys.executable, str(SCRIPTED), str(folder)]


def make_runner(
    settings: Settings, db: Database, tmp_path: Path, tmux: TmuxServer, **options: Any
) -> AgentModeRunner:
    """A runner over the test's sessions dir, data dir and tmux server (fast polling)."""
    service = AgentModeService(settings, db, SessionFiles(tmp_path / "sessions"))
    return AgentModeRunner(
        service, tmux, data_dir=tmp_path / "data", poll_secs=0.05, search=(), **options
    )


async def until(
    probe: Callable[[], Any], what: str, timeout: float = 60.0, describe: Callable[[], str] = str
) -> Any:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        found = probe()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}: {describe()}")
