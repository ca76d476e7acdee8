"""What the runner keeps beside a session file: how its tasks are started and what they gave.

The seed's session file has no place for the coding CLI chosen at `start`, the start
branch, the planned branches, a waiting sub-agent's question or a finished task's diff
and delivery (pull request or local branch), so the runner writes them to
`{data_dir}/agent-mode/{session_id}/run.json` (atomic, 0600). Each task's sub-agent has
its own directory there: `{task_id}/home` (its HOME) and `{task_id}/signals`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from opencrab.agentmode.files import _fsync_dir


class TaskOutcome(BaseModel):
    """A finished task's diff and where its work went."""

    branch: str
    diff_stat: str = ""
    files_changed: int = 0
    insertions: int = 0
    deletions: int = 0
    patch_file: str | None = None
    pull_request_url: str | None = None
    delivery: str = ""  # "pull request …" or "local branch … (why no pull request)"
    imported_files: int = 0


class RunState(BaseModel):
    """The runner's own record of one session."""

    cli: str
    command: list[str] | None = None
    start_branch: str
    full_auto: bool = True
    branches: dict[str, str] = Field(default_factory=dict)  # task id -> branch
    questions: dict[str, str] = Field(default_factory=dict)  # task id -> waiting question
    outcomes: dict[str, TaskOutcome] = Field(default_factory=dict)
    signal_offsets: dict[str, int] = Field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The state as plain JSON values."""
        return self.model_dump(mode="json")


class RunFiles:
    """The runner's directory: one folder per session under `{data_dir}/agent-mode`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def session_dir(self, session_id: str) -> Path:
        """The session's folder."""
        return self.root / session_id

    def task_dir(self, session_id: str, task_id: str) -> Path:
        """A task's sub-agent folder (its HOME and signals live below)."""
        return self.root / session_id / task_id

    def load(self, session_id: str) -> RunState | None:
        """The session's run state, or None before it was started."""
        path = self.session_dir(session_id) / "run.json"
        try:
            return RunState.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None

    def save(self, session_id: str, state: RunState) -> None:
        """Write the run state atomically (mode 0600)."""
        folder = self.session_dir(session_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = folder / "run.json.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state.as_json(), handle, ensure_ascii=False, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, folder / "run.json")
        _fsync_dir(folder)
