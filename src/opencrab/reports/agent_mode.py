"""Agent-mode sessions as the API and the Agent mode page show them: the index's
summaries, a session as the seed's record in camelCase with its run state, a task's diff,
the worktrees' disk use, and the WebSocket notice of a runner change."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic.alias_generators import to_camel

from opencrab.agentmode import worktrees
from opencrab.agentmode.model import AgentSession, SessionStatus
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.service import AgentModeService
from opencrab.core.runtime import Runtime
from opencrab.errors import NotFoundError
from opencrab.offload import run_blocking
from opencrab.reports.model import ApiModel
from opencrab.store.repositories.agent_mode import AgentModeSessionRow

CLI_CHOICES = ("claude", "codex", "gemini", "opencode", "other")
"""The coding CLIs a session can be started with (`other`: any program, `command`)."""


class SessionSummary(ApiModel):
    id: str
    repository_path: str
    status: SessionStatus
    title: str = Field(description="The request's first line.")
    request: str
    tasks_total: int
    task_counts: dict[str, int] = Field(description="Tasks by state (pending, ready, …).")
    created_at: datetime
    updated_at: datetime


def camel_keys(value: Any) -> Any:
    """`value` with every dict key in camelCase (values untouched)."""
    if isinstance(value, dict):
        return {to_camel(k): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def session_json(session: AgentSession) -> dict[str, Any]:
    """The API shape of a session: the seed's record, keys in camelCase."""
    data: dict[str, Any] = camel_keys(session.model_dump(mode="json"))
    return data


def summary(row: AgentModeSessionRow) -> SessionSummary:
    """The API shape of an indexed session."""
    return SessionSummary(
        id=row.id,
        repository_path=row.repository_path,
        status=SessionStatus(row.status),
        title=row.title,
        request=row.request,
        tasks_total=row.tasks_total,
        task_counts=row.task_counts,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def session_list(
    runtime: Runtime,
    *,
    status: SessionStatus | None,
    repository: str | None,
    limit: int,
    offset: int,
) -> list[SessionSummary]:
    """Sessions from the index, most recently updated first."""
    rows = AgentModeService.open(runtime.settings, runtime.db).list(
        status=status,
        repository=None if repository is None else Path(repository),
        limit=limit,
        offset=offset,
    )
    return [summary(row) for row in rows]


def with_run(runner: AgentModeRunner, session: AgentSession) -> dict[str, Any]:
    """A session with its run state (`run`: questions, diffs, deliveries; null unstarted)."""
    data = session_json(session)
    state = runner.run_state(session.id)
    data["run"] = None if state is None else camel_keys(state.as_json())
    return data


class WorktreeDisk(ApiModel):
    path: str
    branch: str
    bytes: int = Field(description="Bytes on disk (0 once the worktree is removed).")
    exists: bool


class DiskUse(ApiModel):
    session_bytes: int = Field(description="Bytes used by this session's worktrees.")
    repository_worktrees_bytes: int = Field(
        description="Bytes used by every worktree under the repository's `.worktrees/`."
    )
    worktrees: list[WorktreeDisk]


async def session_disk(session: AgentSession) -> DiskUse:
    """Disk used by the session's worktrees and by all of its repository's worktrees."""

    def measure() -> list[WorktreeDisk]:
        rows = []
        for ref in session.worktrees:
            path = Path(ref.path)
            there = path.is_dir()
            size = worktrees.disk_usage(path) if there else 0
            rows.append(
                WorktreeDisk(path=str(path), branch=ref.branch_name, bytes=size, exists=there)
            )
        return rows

    rows = await run_blocking(measure)
    everything = await worktrees.worktrees_disk_usage(session.repository_path)
    return DiskUse(
        session_bytes=sum(r.bytes for r in rows),
        repository_worktrees_bytes=sum(everything.values()),
        worktrees=rows,
    )


class TaskDiff(ApiModel):
    task_id: str
    branch: str
    stat: str = Field(description="`git diff --stat` against the start branch.")
    files_changed: int
    insertions: int
    deletions: int
    patch: str = Field(description="The patch (cut at the runner's limit).")
    delivery: str = Field(description="The pull request or the local branch.")
    pull_request_url: str | None


def task_diff(runner: AgentModeRunner, session_id: str, task_id: str) -> TaskDiff:
    """A finished task's diff (NotFoundError before its work was delivered)."""
    session = runner.service.get(session_id)
    if session.task(task_id) is None:
        raise NotFoundError(f"session {session_id} has no task {task_id}")
    state = runner.run_state(session_id)
    outcome = None if state is None else state.outcomes.get(task_id)
    if outcome is None:
        raise NotFoundError(f"{task_id} has no diff yet (it has not finished)")
    patch = ""
    if outcome.patch_file is not None:
        with contextlib.suppress(FileNotFoundError):
            patch = Path(outcome.patch_file).read_text(encoding="utf-8", errors="replace")
    return TaskDiff(
        task_id=task_id,
        branch=outcome.branch,
        stat=outcome.diff_stat,
        files_changed=outcome.files_changed,
        insertions=outcome.insertions,
        deletions=outcome.deletions,
        patch=patch,
        delivery=outcome.delivery,
        pull_request_url=outcome.pull_request_url,
    )


def agent_mode_notice(runner: AgentModeRunner, session_id: str, task_id: str | None) -> str:
    """The WebSocket notice of one runner change (server/api/ws.py describes it)."""
    session = runner.current(session_id)
    task = None if session is None or task_id is None else session.task(task_id)
    agent = None if task is None else task.sub_agent
    notice = {
        "type": "agentMode",
        "kind": "agentMode",
        "sessionId": session_id,
        "taskId": task_id,
        "sessionStatus": None if session is None else session.status.value,
        "taskStatus": None if task is None else task.status.value,
        "subAgentStatus": None if agent is None else agent.status.value,
    }
    return json.dumps(notice)
