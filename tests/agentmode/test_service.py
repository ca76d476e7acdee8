"""The session service: the plan edited before start (and refused after), the index
refreshed on every save and rebuilt from the files, on both databases."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from opencrab.agentmode.files import SessionFiles
from opencrab.agentmode.model import AgentSession, SessionStatus, TaskStatus, WorktreeStrategy
from opencrab.agentmode.service import AgentModeService
from opencrab.agentmode.states import move_task
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import load_settings
from opencrab.errors import ConflictError, PlanError
from opencrab.store import Database

SEED_EXAMPLE = Path(__file__).parents[1] / "fixtures" / "seed004" / "session.json"


def planned_session() -> AgentSession:
    """The seed's example as a fresh plan: a new v4 id, its task Pending and not started."""
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    data["id"] = str(uuid.uuid4())
    data["tasks"][0].update(
        status="Pending",
        assigned_worktree=None,
        sub_agent=None,
        started_at=None,
        completed_at=None,
        result=None,
    )
    data["worktrees"] = []
    return AgentSession.model_validate(data)


@pytest.fixture
def service(any_db: Database, tmp_path: Path) -> AgentModeService:
    settings = load_settings()
    return AgentModeService(settings, any_db, SessionFiles(tmp_path / "sessions"))


def test_edit_plan_replaces_the_tasks_and_refreshes_the_index(
    service: AgentModeService,
) -> None:
    session = planned_session()
    service.save(session)
    edited = service.edit_plan(
        session.id,
        [
            PlannedTask("task-001", "JWT", "keep"),
            PlannedTask("task-002", "tests", "t", ("task-001",), WorktreeStrategy.SHARED),
        ],
    )
    assert [t.id for t in edited.tasks] == ["task-001", "task-002"]
    assert edited.tasks[0].created_at == session.tasks[0].created_at  # kept id, kept time
    assert edited.conversation.messages[-1].content == "The user edited the plan: 2 tasks."
    assert service.get(session.id) == edited
    [row] = service.list()
    assert (row.tasks_total, row.task_counts["pending"]) == (2, 2)


def test_an_invalid_edit_names_its_problems_and_changes_nothing(
    service: AgentModeService,
) -> None:
    session = planned_session()
    path = service.save(session)
    before = path.read_bytes()
    with pytest.raises(PlanError) as caught:
        service.edit_plan(
            session.id,
            [
                PlannedTask("task-001", "a", "a", ("task-002",)),
                PlannedTask("task-002", "b", "b", ("task-001", "task-009")),
            ],
        )
    assert caught.value.problems == [
        "task-002 depends on task-009, which is not a task of the session",
        "dependency cycle: task-001 → task-002 → task-001",
    ]
    assert path.read_bytes() == before


def test_the_plan_is_locked_once_a_task_has_left_pending(service: AgentModeService) -> None:
    session = planned_session()
    move_task(session.tasks[0], TaskStatus.READY)
    service.save(session)
    with pytest.raises(ConflictError, match="task-001 is Ready"):
        service.edit_plan(session.id, [PlannedTask("task-001", "x", "y")])
    paused = planned_session()
    paused.status = SessionStatus.PAUSED
    service.save(paused)
    with pytest.raises(ConflictError, match="is Paused"):
        service.edit_plan(paused.id, [PlannedTask("task-001", "x", "y")])


def test_reindex_rebuilds_from_the_files_and_reports_corrupt_ones(
    service: AgentModeService, tmp_path: Path
) -> None:
    kept, gone = planned_session(), planned_session()
    service.save(kept)
    service.save(gone)
    service.files.path_for(gone.id).unlink()  # a file removed by hand
    broken = tmp_path / "sessions" / f"{uuid.uuid4()}.json"
    broken.write_text("{", encoding="utf-8")
    result = service.reindex()
    assert result.sessions == 1
    [corrupt] = result.corrupt
    assert corrupt.path == broken
    assert corrupt.moved_to.exists()
    assert [row.id for row in service.list()] == [kept.id]
    assert [row.id for row in service.list(status=SessionStatus.COMPLETED)] == []


def test_an_edit_over_max_tasks_is_refused(service: AgentModeService) -> None:
    session = planned_session()
    service.save(session)
    service.settings.agent_mode.max_tasks = 2
    too_many = [PlannedTask(f"task-00{n}", f"t{n}", "x") for n in (1, 2, 3)]
    with pytest.raises(PlanError, match="3 tasks; at most 2"):
        service.edit_plan(session.id, too_many)
    assert len(service.get(session.id).tasks) == 1
