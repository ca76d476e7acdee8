"""Seed 004's JSON example round-trips through the model: same values, same key order."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from opencrab.agentmode.model import (
    AgentSession,
    CompletionSource,
    MessageRole,
    SessionStatus,
    SubAgentType,
    TaskStatus,
    WorktreeStrategy,
    dump_session,
    load_session_json,
)

SEED_EXAMPLE = Path(__file__).parents[1] / "fixtures" / "seed004" / "session.json"


def test_the_seed_example_round_trips_exactly() -> None:
    text = SEED_EXAMPLE.read_text(encoding="utf-8")
    session = load_session_json(text)
    assert session.status is SessionStatus.ACTIVE
    assert session.conversation.messages[0].role is MessageRole.USER
    assert session.conversation.messages[0].content == "認証機能を実装して"
    task = session.tasks[0]
    assert task.status is TaskStatus.COMPLETED
    assert task.worktree_strategy is WorktreeStrategy.NEW
    assert task.sub_agent is not None
    assert task.sub_agent.agent_type is SubAgentType.CLAUDE_CODE
    assert task.sub_agent.completion_source is CompletionSource.HOOK
    assert task.sub_agent.pid == 12345
    assert task.result is not None
    assert task.result.pull_request is not None
    assert task.result.pull_request.number == 123
    assert task.result.error is None
    assert task.created_at == datetime(2026, 1, 22, 10, 30, 5, tzinfo=UTC)
    assert str(session.worktrees[0].path) == "/path/to/.worktrees/agent-jwt-auth"
    dumped, seed = json.loads(dump_session(session)), json.loads(text)
    assert dumped == seed
    assert list(dumped) == list(seed)  # the example's key order, too
    assert list(dumped["tasks"][0]) == list(seed["tasks"][0])
    assert "認証機能を実装して" in dump_session(session)  # UTF-8 kept, not \u-escaped


def test_enums_serialise_as_the_seeds_variant_names() -> None:
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    data["status"] = "Paused"
    data["tasks"][0]["sub_agent"]["agent_type"] = "OpenCode"
    data["tasks"][0]["sub_agent"]["status"] = "WaitingInput"
    data["tasks"][0]["sub_agent"]["completion_source"] = "ProcessExit"
    data["tasks"][0]["worktree_strategy"] = "Shared"
    dumped = json.loads(dump_session(AgentSession.model_validate(data)))
    assert dumped["status"] == "Paused"
    assert dumped["tasks"][0]["sub_agent"]["agent_type"] == "OpenCode"
    assert dumped["tasks"][0]["sub_agent"]["status"] == "WaitingInput"
    assert dumped["tasks"][0]["sub_agent"]["completion_source"] == "ProcessExit"
    assert dumped["tasks"][0]["worktree_strategy"] == "Shared"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("status",), "active"),  # variant names are case-sensitive, as serde's
        (("tasks", 0, "status"), "Done"),
        (("tasks", 0, "sub_agent", "agent_type"), "Claude"),
        (("created_at",), "2026-01-22T10:30:00"),  # no zone
        (("tasks", 0, "sub_agent", "pid"), -1),
    ],
)
def test_values_outside_the_seed_are_refused(path: tuple[object, ...], value: object) -> None:
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError):
        AgentSession.model_validate(data)


def test_a_field_the_seed_does_not_have_is_refused() -> None:
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    data["tasks"][0]["branch"] = "agent/x"
    with pytest.raises(ValidationError, match="branch"):
        AgentSession.model_validate(data)


def test_timestamps_in_another_zone_are_stored_in_utc() -> None:
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    data["updated_at"] = "2026-01-22T20:45:00+09:00"
    dumped = json.loads(dump_session(AgentSession.model_validate(data)))
    assert dumped["updated_at"] == "2026-01-22T11:45:00Z"
