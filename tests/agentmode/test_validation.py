"""Seed 004's validation rules: ids, branch names (checked by real git), the DAG."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from opencrab.agentmode.model import AgentSession, WorktreeStrategy
from opencrab.agentmode.validation import (
    PlannedTask,
    branch_name_for,
    branch_name_problem,
    check_plan,
    find_cycle,
    is_uuid4,
    plan_branches,
    plan_problems,
    session_problems,
    slugify,
    task_id,
)
from opencrab.errors import PlanError

SEED_EXAMPLE = Path(__file__).parents[1] / "fixtures" / "seed004" / "session.json"
NEW, SHARED = WorktreeStrategy.NEW, WorktreeStrategy.SHARED


def task(tid: str, *deps: str, name: str = "x", strategy: WorktreeStrategy = NEW) -> PlannedTask:
    return PlannedTask(tid, name, "do it", tuple(deps), strategy)


def test_session_ids_must_be_uuid_v4() -> None:
    assert is_uuid4(str(uuid.uuid4()))
    assert not is_uuid4(str(uuid.uuid1()))
    assert not is_uuid4("")
    assert not is_uuid4(str(uuid.uuid4()).upper())  # canonical form only
    assert not is_uuid4("not-a-uuid")


def test_the_seed_examples_own_id_is_not_a_v4_uuid_and_is_reported() -> None:
    session = AgentSession.model_validate_json(SEED_EXAMPLE.read_bytes())
    assert session_problems(session) == [
        "session id 'a1b2c3d4-e5f6-7890-abcd-ef1234567890' is not a UUID v4"
    ]
    session.id = str(uuid.uuid4())  # type: ignore[assignment]
    assert session_problems(session) == []


def test_task_ids_are_task_nnn_and_unique() -> None:
    assert task_id(1) == "task-001"
    assert task_id(1234) == "task-1234"
    problems = plan_problems([task("task-001"), task("task-001"), task("step-3"), task("")])
    assert "task id task-001 is used twice" in problems
    assert "task #3: id 'step-3' is not of the form task-NNN" in problems
    assert "task #4: id '' is not of the form task-NNN" in problems


def test_a_dependency_on_a_missing_task_is_named() -> None:
    with pytest.raises(PlanError) as caught:
        check_plan([task("task-001"), task("task-002", "task-009")])
    assert caught.value.problems == [
        "task-002 depends on task-009, which is not a task of the session"
    ]


def test_a_cycle_is_named_by_its_path() -> None:
    tasks = [
        task("task-001"),
        task("task-002", "task-001", "task-004"),
        task("task-003", "task-002"),
        task("task-004", "task-003"),
    ]
    assert plan_problems(tasks) == ["dependency cycle: task-002 → task-004 → task-003 → task-002"]
    assert plan_problems([task("task-001", "task-001")]) == ["task-001 depends on itself"]


def test_a_diamond_is_no_cycle() -> None:
    tasks = [
        task("task-001"),
        task("task-002", "task-001"),
        task("task-003", "task-001"),
        task("task-004", "task-002", "task-003"),
    ]
    assert plan_problems(tasks) == []
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None


def test_a_shared_task_needs_a_dependency_and_an_empty_plan_is_refused() -> None:
    assert plan_problems([task("task-001", strategy=SHARED)]) == [
        "task-001 shares its dependency's worktree (Shared) but depends on no task"
    ]
    assert plan_problems([]) == ["the plan has no tasks"]
    assert plan_problems([task("task-001", name="  ")]) == ["task-001: the name is empty"]


def test_branch_names_are_slugs_with_fallback_and_suffixes() -> None:
    assert slugify("Add JWT auth (v2)!") == "add-jwt-auth-v2"
    assert slugify("Café déjà vu") == "cafe-deja-vu"
    assert branch_name_for("task-001", "Add JWT auth") == "agent/add-jwt-auth"
    assert branch_name_for("task-002", "認証機能を実装") == "agent/task-002"
    taken = {"agent/add-jwt-auth", "agent/add-jwt-auth-2"}
    assert branch_name_for("task-003", "add jwt AUTH", taken) == "agent/add-jwt-auth-3"
    assert len(branch_name_for("task-004", "x" * 500)) <= len("agent/") + 48


def test_plan_branches_give_shared_tasks_their_dependencys_branch() -> None:
    tasks = [
        task("task-001", name="JWT 認証"),
        task("task-002", "task-001", name="tests", strategy=SHARED),
        task("task-003", name="jwt"),
        task("task-004", name="ログイン画面"),
    ]
    assert plan_branches(tasks, taken={"agent/jwt"}) == {
        "task-001": "agent/jwt-2",
        "task-002": "agent/jwt-2",
        "task-003": "agent/jwt-3",
        "task-004": "agent/task-004",
    }


@pytest.mark.parametrize(
    "branch",
    ["agent/jwt-auth", "agent/task-001", "agent/A_b-9"],
)
def test_good_branch_names_pass_the_rule_and_git(branch: str) -> None:
    assert branch_name_problem(branch) is None
    git = subprocess.run(["git", "check-ref-format", "--branch", branch], check=False)
    assert git.returncode == 0


@pytest.mark.parametrize(
    "branch",
    ["jwt-auth", "agent/", "agent/a.b", "agent/a/b", "agent/日本", "agent/a b", "agent/a..b"],
)
def test_bad_branch_names_are_named(branch: str) -> None:
    problem = branch_name_problem(branch)
    assert problem is not None
    assert repr(branch) in problem


def test_every_slugified_branch_is_accepted_by_git() -> None:
    names = ["@{-1}", "-leading", "a.lock", "HEAD", "x" * 300, "..", "ﾃｽﾄ", "a/b\\c", "~^:?*["]
    taken: set[str] = set()
    for number, name in enumerate(names, start=1):
        branch = branch_name_for(task_id(number), name, taken)
        taken.add(branch)
        assert branch_name_problem(branch) is None, (name, branch)
