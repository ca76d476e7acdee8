"""Seed 004's validation rules: session ids, task ids, branch names and the DAG.

- SessionId: a UUID v4 in its canonical form (lower-case, hyphenated); never empty.
- TaskId: `task-{number}` (OpenCrab writes `task-001`), unique in the session.
- Branch names: `agent/` + ASCII letters, digits, `-` and `_` only; also accepted by
  `git check-ref-format --branch`. `branch_name_for` slugifies a task's name; a name
  with nothing left (Japanese, say) falls back to `agent/task-NNN`; a taken name gets
  `-2`, `-3`, ….
- Dependencies: only on tasks of the session, never on itself, no cycle. A Shared task
  works in its dependency's worktree, so it has at least one dependency.

`session_problems` / `plan_problems` list every problem, each naming the task, the
dependency or the cycle path; `check_session` / `check_plan` raise PlanError with them.

Example:
    check_plan(session.tasks)          # PlanError: "task-002 depends on task-009, …"
    branch_name_for("task-003", "JWT 認証", taken={"agent/jwt"})   # "agent/jwt-2"
"""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from opencrab.agentmode.model import AgentSession, WorktreeStrategy
from opencrab.errors import PlanError

TASK_ID = re.compile(r"task-[0-9]+")
BRANCH_PREFIX = "agent/"
BRANCH = re.compile(r"agent/[A-Za-z0-9_-]+")
MAX_SLUG = 48
"""Characters of a task name kept in its branch name (before a collision suffix)."""


@dataclass(frozen=True)
class PlannedTask:
    """A task as a plan gives it: what the planner or an editor may set."""

    id: str
    name: str
    description: str
    dependencies: tuple[str, ...] = ()
    worktree_strategy: WorktreeStrategy = WorktreeStrategy.NEW


class TaskLike(Protocol):
    """What the DAG rules read of a task (a Task or a PlannedTask)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def dependencies(self) -> Sequence[str]: ...
    @property
    def worktree_strategy(self) -> WorktreeStrategy: ...


def is_uuid4(text: str) -> bool:
    """True when `text` is a canonical UUID v4 (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-…`)."""
    try:
        parsed = uuid.UUID(text)
    except (ValueError, TypeError, AttributeError):
        return False
    return parsed.version == 4 and str(parsed) == text


def session_id_problem(session_id: str) -> str | None:
    """Why `session_id` is not a valid SessionId, or None."""
    if not session_id:
        return "the session id is empty"
    if not is_uuid4(session_id):
        return f"session id {session_id!r} is not a UUID v4"
    return None


def task_id(number: int) -> str:
    """The `number`th task's id: task-001, task-002, … (more digits past 999)."""
    return f"task-{number:03d}"


def plan_problems(tasks: Sequence[TaskLike]) -> list[str]:
    """Every problem of a task list: ids, names, dependencies, cycles, Shared tasks."""
    problems: list[str] = []
    if not tasks:
        return ["the plan has no tasks"]
    seen: set[str] = set()
    for index, task in enumerate(tasks, start=1):
        tid = task.id
        where = tid or f"task #{index}"
        if not TASK_ID.fullmatch(tid):
            problems.append(f"task #{index}: id {tid!r} is not of the form task-NNN")
        elif tid in seen:
            problems.append(f"task id {tid} is used twice")
        seen.add(tid)
        if not task.name.strip():
            problems.append(f"{where}: the name is empty")
    ids = {t.id for t in tasks}
    for task in tasks:
        tid = task.id
        deps = list(task.dependencies)
        listed: set[str] = set()
        for dep in deps:
            if dep in listed:
                problems.append(f"{tid} lists dependency {dep} twice")
            listed.add(dep)
            if dep == tid:
                problems.append(f"{tid} depends on itself")
            elif dep not in ids:
                problems.append(f"{tid} depends on {dep}, which is not a task of the session")
        if task.worktree_strategy is WorktreeStrategy.SHARED and not deps:
            problems.append(
                f"{tid} shares its dependency's worktree (Shared) but depends on no task"
            )
    cycle = find_cycle({t.id: list(t.dependencies) for t in tasks})
    if cycle is not None:
        problems.append("dependency cycle: " + " → ".join(cycle))
    return problems


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle as a path that starts and ends on the same task, or None.

    Self-dependencies and unknown tasks are ignored here (plan_problems names them).
    """
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            if child == node or child not in graph or child in done:
                continue
            if child in on_path:
                return [*path[path.index(child) :], child]
            stack.append((child, iter(graph[child])))
            path.append(child)
            on_path.add(child)
    return None


def check_plan(tasks: Sequence[TaskLike]) -> None:
    """Raise PlanError listing every problem of the task list."""
    problems = plan_problems(tasks)
    if problems:
        raise PlanError(problems)


def session_problems(session: AgentSession) -> list[str]:
    """Every seed-004 problem of a session: its id, its tasks, its worktrees' branches."""
    problems: list[str] = []
    if (why := session_id_problem(session.id)) is not None:
        problems.append(why)
    problems += plan_problems(session.tasks) if session.tasks else []
    refs = list(session.worktrees)
    refs += [t.assigned_worktree for t in session.tasks if t.assigned_worktree is not None]
    for ref in refs:
        if (why := branch_name_problem(ref.branch_name)) is not None:
            problems.append(why)
    return list(dict.fromkeys(problems))


def check_session(session: AgentSession) -> None:
    """Raise PlanError listing every problem of the session."""
    problems = session_problems(session)
    if problems:
        raise PlanError(problems)


def slugify(text: str) -> str:
    """Letters and digits of `text` (accents dropped) joined by `-`, lower-case, capped."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", ascii_text).strip("-").lower()
    return slug[:MAX_SLUG].rstrip("-")


def branch_name_for(task_id: str, name: str, taken: Collection[str] = ()) -> str:
    """The branch for a task: `agent/<slug of name>`, else `agent/<task id>`; a name in
    `taken` gets the first free `-2`, `-3`, … suffix."""
    slug = slugify(name) or task_id
    base = BRANCH_PREFIX + slug
    branch, n = base, 1
    while branch in taken:
        n += 1
        branch = f"{base}-{n}"
    return branch


def plan_branches(tasks: Sequence[TaskLike], taken: Collection[str] = ()) -> dict[str, str]:
    """Each task's branch, in plan order: a New task its own (`branch_name_for`), a
    Shared task its first dependency's; `taken` are branches already in use."""
    used = set(taken)
    by_id = {t.id: t for t in tasks}
    branches: dict[str, str] = {}

    def branch_of(task: TaskLike, seen: frozenset[str]) -> str:
        if task.id in branches:
            return branches[task.id]
        first = task.dependencies[0] if task.dependencies else None
        if (
            task.worktree_strategy is WorktreeStrategy.SHARED
            and first in by_id
            and first not in seen
        ):
            branch = branch_of(by_id[first], seen | {task.id})
        else:
            branch = branch_name_for(task.id, task.name, used)
            used.add(branch)
        branches[task.id] = branch
        return branch

    for task in tasks:
        branch_of(task, frozenset())
    return branches


def branch_name_problem(branch: str, *, git: bool = True) -> str | None:
    """Why `branch` is not an agent branch name (the seed's rule, then git's), or None."""
    if not BRANCH.fullmatch(branch):
        return f"branch {branch!r} must be 'agent/' followed by letters, digits, '-' or '_' only"
    if git and not git_accepts_branch(branch):
        return f"branch {branch!r} is refused by `git check-ref-format --branch`"
    return None


def git_accepts_branch(branch: str) -> bool:
    """Whether `git check-ref-format --branch` accepts `branch` (git must be installed)."""
    git = shutil.which("git")
    if git is None:
        raise PlanError(["git is not installed; agent mode needs it to check branch names"])
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, "check-ref-format", "--branch", branch],
        capture_output=True,
        check=False,
        timeout=30,
    )
    return done.returncode == 0
