"""Agent mode's pages (seed 004): the sessions (`/agent-mode`) and one session's DAG
(`/agent-mode/{id}`).

The list reads what `GET /api/agent-mode/sessions` reads and plans a new session with
`POST /api/agent-mode/sessions`. A session's page reads what `GET …/{id}/run`,
`GET …/{id}/disk`, `GET …/tasks/{task}/diff` and `GET …/tasks/{task}/output` answer, so
it reads without JavaScript: the DAG as a list of tasks with their dependencies, each
task's state, question, output, result, diff and delivery, and the disk use. With
JavaScript (`static/js/agent_mode.js`) the DAG is drawn as a graph and everything
follows the session live over the WebSocket. Every change (edit the plan, start, answer,
pause, resume, cancel, retry, cleanup) goes through the REST API.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from opencrab.agentmode.model import AgentSession, SessionStatus, Task, TaskStatus
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.dashboard.render import render, text_lang
from opencrab.errors import OpenCrabError
from opencrab.offload import run_blocking
from opencrab.reports.agent_mode import (
    CLI_CHOICES,
    DiskUse,
    SessionSummary,
    TaskDiff,
    session_disk,
    summary,
    task_diff,
)

router = APIRouter()

SessionId = Annotated[UUID, Path(alias="id", description="The agent-mode session's id.")]


@dataclass(frozen=True)
class TaskView:
    """One task as the page shows it."""

    task: Task
    depth: int  # its layer in the DAG (0: no dependencies)
    branch: str
    question: str | None
    output: str | None
    diff: TaskDiff | None


def human_bytes(size: int) -> str:
    """1536 -> "1.5 KiB"."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def tidy_output(text: str) -> str:
    """A pane's capture without the terminal's unused rows (runs of blank lines become one)."""
    lines = "\n".join(line.rstrip() for line in text.splitlines())
    return re.sub(r"\n{3,}", "\n\n", lines).strip("\n")


def depths(session: AgentSession) -> dict[str, int]:
    """Each task's layer: one more than its deepest dependency (the plan has no cycles)."""
    by_id: dict[str, Task] = {t.id: t for t in session.tasks}
    found: dict[str, int] = {}

    def depth(task_id: str, seen: frozenset[str]) -> int:
        if task_id not in found:
            task = by_id.get(task_id)
            deps = [] if task is None else [d for d in task.dependencies if d not in seen]
            found[task_id] = 1 + max((depth(d, seen | {d}) for d in deps), default=-1)
        return found[task_id]

    for task in session.tasks:
        depth(task.id, frozenset({task.id}))
    return found


def shown_status(session: AgentSession) -> str:
    """The session's state as a person reads it: the seed has no cancelled session, so a
    cancelled one is Failed in its file; it shows as Cancelled when no task failed."""
    statuses = {t.status for t in session.tasks}
    if (
        session.status is SessionStatus.FAILED
        and TaskStatus.CANCELLED in statuses
        and TaskStatus.FAILED not in statuses
    ):
        return "Cancelled"
    return session.status.value


def listed_status(row: SessionSummary) -> str:
    """`shown_status` of a listed session, from its task counts."""
    counts = row.task_counts
    if row.status is SessionStatus.FAILED and counts.get("cancelled") and not counts.get("failed"):
        return "Cancelled"
    return row.status.value


@router.get("/agent-mode", response_class=HTMLResponse)
async def sessions_page(request: Request) -> HTMLResponse:
    """Every agent-mode session, newest change first, and the form that plans one."""
    runner: AgentModeRunner = request.app.state.agent_mode
    rows = await run_blocking(runner.service.list, limit=200)
    sessions: list[SessionSummary] = [summary(row) for row in rows]
    return render(
        request,
        "agent_mode.html",
        title="Agent mode",
        sessions=sessions,
        text_lang=text_lang,
        listed_status=listed_status,
    )


async def _task_views(runner: AgentModeRunner, session: AgentSession) -> list[TaskView]:
    state = runner.run_state(session.id)
    layers = depths(session)
    views = []
    for task in session.tasks:
        output = None
        if task.sub_agent is not None:
            try:
                output = tidy_output(await runner.output(session.id, task.id))
            except OpenCrabError as error:
                output = str(error)
        diff = None
        if state is not None and task.id in state.outcomes:
            diff = await run_blocking(task_diff, runner, session.id, task.id)
        branch = task.assigned_worktree.branch_name if task.assigned_worktree else ""
        if not branch and state is not None:
            branch = state.branches.get(task.id, "")
        question = None if state is None else state.questions.get(task.id)
        if task.status is not TaskStatus.RUNNING:
            question = None  # an ended task asks nothing (cancelled while it waited)
        views.append(TaskView(task, layers[task.id], branch, question, output, diff))
    return views


@router.get("/agent-mode/{id}", response_class=HTMLResponse)
async def session_page(session_id: SessionId, request: Request) -> HTMLResponse:
    """One session: its DAG, tasks live, questions, results, diffs, disk use, controls."""
    runner: AgentModeRunner = request.app.state.agent_mode
    session = await run_blocking(runner.service.get, str(session_id))
    state = runner.run_state(session.id)
    disk: DiskUse = await session_disk(session)
    tasks = await _task_views(runner, session)
    request_text = session.request()
    title = request_text.splitlines()[0] if request_text else f"Session {session.id[:8]}"
    plan = [
        {
            "id": t.id,
            "name": t.name,
            "description": t.description,
            "dependencies": list(t.dependencies),
            "worktreeStrategy": t.worktree_strategy.value,
        }
        for t in session.tasks
    ]
    graph: dict[str, Any] = {
        "tasks": [
            {
                "id": v.task.id,
                "name": v.task.name,
                "status": v.task.status.value,
                "subAgentStatus": v.task.sub_agent.status.value if v.task.sub_agent else None,
                "dependencies": list(v.task.dependencies),
                "depth": v.depth,
            }
            for v in tasks
        ]
    }
    return render(
        request,
        "agent_mode_session.html",
        title=title,
        session=session,
        shown_status=shown_status(session),
        request_text=request_text,
        lang=text_lang(request_text),
        run=state,
        started=state is not None,
        tasks=tasks,
        plan=json.dumps(plan, ensure_ascii=False, indent=2),
        graph=graph,
        disk=disk,
        human_bytes=human_bytes,
        text_lang=text_lang,
        cli_choices=CLI_CHOICES,
    )
