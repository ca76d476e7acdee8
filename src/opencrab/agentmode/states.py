"""Seed 004's state machines, enforced: a task's and a session's allowed moves.

Tasks (the seed's diagram): Pending → Ready (its dependencies completed) → Running
(started) → Completed | Failed | Cancelled. Issue 22 §4 adds what control needs:
cancelling a task that has not started (Pending or Ready → Cancelled) and retrying a
failed one (Failed → Pending; it becomes Ready again when its dependencies are done).
Completed and Cancelled are final.

Sessions (the seed's diagram): Active → Paused | Completed | Failed; Paused → Active
(resume) | Completed; Failed → Active (resume, e.g. after a retry). Completed is final.

Any other move, staying in place included, raises TransitionError naming both states.

Example:
    move_task(task, TaskStatus.RUNNING)      # sets started_at
    move_session(session, SessionStatus.PAUSED)
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from opencrab.agentmode.model import (
    AgentSession,
    MessageRole,
    SessionStatus,
    SubAgentStatus,
    Task,
    TaskResult,
    TaskStatus,
    utcnow,
)
from opencrab.errors import TransitionError

TASK_TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset({TaskStatus.READY, TaskStatus.CANCELLED}),
    TaskStatus.READY: frozenset({TaskStatus.RUNNING, TaskStatus.CANCELLED}),
    TaskStatus.RUNNING: frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}),
    TaskStatus.FAILED: frozenset({TaskStatus.PENDING}),
    TaskStatus.COMPLETED: frozenset(),
    TaskStatus.CANCELLED: frozenset(),
}
"""Each task state and the states it may move to."""

SESSION_TRANSITIONS: Mapping[SessionStatus, frozenset[SessionStatus]] = {
    SessionStatus.ACTIVE: frozenset(
        {SessionStatus.PAUSED, SessionStatus.COMPLETED, SessionStatus.FAILED}
    ),
    SessionStatus.PAUSED: frozenset({SessionStatus.ACTIVE, SessionStatus.COMPLETED}),
    SessionStatus.FAILED: frozenset({SessionStatus.ACTIVE}),
    SessionStatus.COMPLETED: frozenset(),
}
"""Each session state and the states it may move to."""

TASK_FINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
"""States in which a task is not (or no longer) running; Failed can still be retried."""


def check_task_transition(current: TaskStatus, target: TaskStatus, task_id: str = "") -> None:
    """Raise TransitionError unless a task may move from `current` to `target`."""
    if target not in TASK_TRANSITIONS[current]:
        raise TransitionError("task", task_id or "(unnamed)", current.value, target.value)


def check_session_transition(
    current: SessionStatus, target: SessionStatus, session_id: str = ""
) -> None:
    """Raise TransitionError unless a session may move from `current` to `target`."""
    if target not in SESSION_TRANSITIONS[current]:
        raise TransitionError("session", session_id or "(unnamed)", current.value, target.value)


def move_task(task: Task, target: TaskStatus, at: datetime | None = None) -> Task:
    """Move `task` to `target` (checked), stamping started_at / completed_at; returns it.

    Running sets started_at; Completed, Failed and Cancelled set completed_at; a retry
    (Failed → Pending) clears both and the old result.
    """
    check_task_transition(task.status, target, task.id)
    now = at or utcnow()
    if target is TaskStatus.RUNNING:
        task.started_at = now
    elif target in TASK_FINAL:
        task.completed_at = now
    elif target is TaskStatus.PENDING:
        task.started_at = None
        task.completed_at = None
        task.result = None
    task.status = target
    return task


def move_session(
    session: AgentSession, target: SessionStatus, at: datetime | None = None
) -> AgentSession:
    """Move `session` to `target` (checked) and stamp updated_at; returns it."""
    check_session_transition(session.status, target, session.id)
    session.status = target
    session.updated_at = at or utcnow()
    return session


def fail_task(session: AgentSession, task: Task, reason: str) -> None:
    """Fail `task` (Running) with `reason`: its sub-agent ends in Error unless it had
    completed, its result says why, and so does the session's conversation."""
    now = utcnow()
    if task.sub_agent is not None and task.sub_agent.status is not SubAgentStatus.COMPLETED:
        task.sub_agent.status = SubAgentStatus.ERROR
        task.sub_agent.completed_at = now
    task.result = TaskResult(success=False, summary=reason, pull_request=None, error=reason)
    move_task(task, TaskStatus.FAILED, now)
    session.conversation.add(MessageRole.SYSTEM, f"{task.id} failed: {reason}", now)
