"""Seed 004's state machines: every legal move passes, illegal ones name both states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opencrab.agentmode.model import AgentSession, SessionStatus, TaskStatus
from opencrab.agentmode.states import (
    SESSION_TRANSITIONS,
    TASK_TRANSITIONS,
    check_session_transition,
    check_task_transition,
    move_session,
    move_task,
)
from opencrab.errors import TransitionError

SEED_EXAMPLE = Path(__file__).parents[1] / "fixtures" / "seed004" / "session.json"
T = TaskStatus
S = SessionStatus

LEGAL_TASK = [
    (T.PENDING, T.READY),  # dependencies completed
    (T.READY, T.RUNNING),  # started
    (T.RUNNING, T.COMPLETED),
    (T.RUNNING, T.FAILED),
    (T.RUNNING, T.CANCELLED),
    (T.PENDING, T.CANCELLED),  # issue 22 §4: cancel before it starts
    (T.READY, T.CANCELLED),
    (T.FAILED, T.PENDING),  # issue 22 §4: retry
]
ILLEGAL_TASK = [
    (T.PENDING, T.RUNNING),  # skips Ready
    (T.PENDING, T.COMPLETED),
    (T.READY, T.COMPLETED),
    (T.COMPLETED, T.RUNNING),
    (T.COMPLETED, T.PENDING),
    (T.CANCELLED, T.READY),
    (T.FAILED, T.COMPLETED),
    (T.RUNNING, T.PENDING),
    (T.RUNNING, T.RUNNING),
]
LEGAL_SESSION = [
    (S.ACTIVE, S.PAUSED),
    (S.ACTIVE, S.COMPLETED),
    (S.ACTIVE, S.FAILED),
    (S.PAUSED, S.ACTIVE),  # resume
    (S.PAUSED, S.COMPLETED),
    (S.FAILED, S.ACTIVE),  # resume
]
ILLEGAL_SESSION = [
    (S.COMPLETED, S.ACTIVE),
    (S.COMPLETED, S.PAUSED),
    (S.PAUSED, S.FAILED),
    (S.FAILED, S.PAUSED),
    (S.FAILED, S.COMPLETED),
    (S.ACTIVE, S.ACTIVE),
]


def test_the_tables_hold_exactly_the_listed_moves() -> None:
    task_moves = {(a, b) for a, targets in TASK_TRANSITIONS.items() for b in targets}
    session_moves = {(a, b) for a, targets in SESSION_TRANSITIONS.items() for b in targets}
    assert task_moves == set(LEGAL_TASK)
    assert session_moves == set(LEGAL_SESSION)
    assert set(TASK_TRANSITIONS) == set(TaskStatus)
    assert set(SESSION_TRANSITIONS) == set(SessionStatus)


@pytest.mark.parametrize(("current", "target"), LEGAL_TASK)
def test_legal_task_moves_pass(current: TaskStatus, target: TaskStatus) -> None:
    check_task_transition(current, target, "task-001")


@pytest.mark.parametrize(("current", "target"), ILLEGAL_TASK)
def test_illegal_task_moves_name_both_states(current: TaskStatus, target: TaskStatus) -> None:
    with pytest.raises(TransitionError) as caught:
        check_task_transition(current, target, "task-007")
    message = str(caught.value)
    assert f"task task-007 cannot go from {current.value} to {target.value}" == message
    assert (caught.value.current, caught.value.target) == (current.value, target.value)


@pytest.mark.parametrize(("current", "target"), LEGAL_SESSION)
def test_legal_session_moves_pass(current: SessionStatus, target: SessionStatus) -> None:
    check_session_transition(current, target, "s")


@pytest.mark.parametrize(("current", "target"), ILLEGAL_SESSION)
def test_illegal_session_moves_name_both_states(
    current: SessionStatus, target: SessionStatus
) -> None:
    with pytest.raises(TransitionError, match=f"from {current.value} to {target.value}"):
        check_session_transition(current, target, "s")


def _session() -> AgentSession:
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    task = data["tasks"][0]
    task.update(status="Pending", started_at=None, completed_at=None, result=None)
    return AgentSession.model_validate(data)


def test_moving_a_task_stamps_its_times_and_a_refused_move_changes_nothing() -> None:
    session = _session()
    task = session.tasks[0]
    move_task(task, T.READY)
    assert task.started_at is None
    move_task(task, T.RUNNING)
    assert task.started_at is not None
    assert task.completed_at is None
    move_task(task, T.FAILED)
    assert task.completed_at is not None
    with pytest.raises(TransitionError, match="from Failed to Completed"):
        move_task(task, T.COMPLETED)
    assert task.status is T.FAILED
    move_task(task, T.PENDING)  # retry
    assert (task.started_at, task.completed_at, task.result) == (None, None, None)


def test_moving_a_session_stamps_updated_at() -> None:
    session = _session()
    before = session.updated_at
    move_session(session, S.PAUSED)
    assert session.status is S.PAUSED
    assert session.updated_at > before
    with pytest.raises(TransitionError, match=r"session .* from Paused to Failed"):
        move_session(session, S.FAILED)
    assert session.status is S.PAUSED
