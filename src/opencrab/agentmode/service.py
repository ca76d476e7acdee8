"""Agent-mode sessions as the CLI, the API and the dashboard use them: create (plan),
get, list, edit the plan, reindex.

The session file is the source of truth (`files.SessionFiles`); every save rewrites the
session's row in the database index in the same call (`agent_mode` repository), and
`reindex` rebuilds the whole index from the files. Each file is marked with the instance
that saved it (`instance.instance_id`, from the data directory): another instance's
sessions in the same directory are neither read, indexed nor written here. A new session
is the seed's initial state: `Active`, every task `Pending`, nothing started; the plan may
be edited until a task leaves `Pending` (running tasks is the runner's job, not this
module's).

Example:
    service = AgentModeService.open(settings, db)
    session = await service.create_session(router, agents, Path("repo"), "認証機能を実装して")
    service.edit_plan(session.id, [PlannedTask("task-001", "JWT", "…")])
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from opencrab.agentmode.files import CorruptSessionFile, SessionFiles
from opencrab.agentmode.instance import instance_id
from opencrab.agentmode.model import (
    AgentSession,
    Conversation,
    MessageRole,
    SessionId,
    SessionStatus,
    Task,
    TaskId,
    TaskStatus,
    utcnow,
)
from opencrab.agentmode.planner import PlanOutcome, plan_request
from opencrab.agentmode.validation import PlannedTask, check_plan
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate, AgentStore, HeartbeatConfig
from opencrab.errors import ConflictError, NotFoundError, PlanError, ValidationError
from opencrab.llm.router import LlmRouter
from opencrab.messages import check_message
from opencrab.offload import run_blocking
from opencrab.prompts import prompts
from opencrab.store import Database
from opencrab.store.repositories import agent_mode as index
from opencrab.store.repositories.agent_mode import AgentModeSessionRow

TITLE_CHARS = 120
MASTER_DESCRIPTION = "Agent mode's master agent: splits requests into task DAGs for coding CLIs."


@dataclass(frozen=True)
class Reindexed:
    """What a reindex found: sessions indexed, and files moved aside as corrupt."""

    sessions: int
    corrupt: list[CorruptSessionFile]


def repository_root(path: Path) -> Path:
    """The top directory of the git work tree holding `path`; ValidationError otherwise
    (a path the OS cannot even look up, such as one over its length limits, included)."""
    git = shutil.which("git")
    if git is None:
        raise ValidationError("git is not installed; agent mode needs it")
    try:
        is_dir = path.is_dir()
    except OSError as error:  # ENAMETOOLONG: a name or the path over the OS's limit
        raise ValidationError(f"repository path {str(path)[:80]}…: {error.strerror}") from None
    if not is_dir:
        raise ValidationError(f"repository {path} is not a directory")
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if done.returncode != 0:
        raise ValidationError(f"{path} is not inside a git repository: {done.stderr.strip()}")
    return Path(done.stdout.strip()).resolve()


def title_of(request: str) -> str:
    """The request's first non-empty line, shortened for lists."""
    line = next((x.strip() for x in request.splitlines() if x.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


def index_row(session: AgentSession, file_path: Path) -> AgentModeSessionRow:
    """The session's row in the database index."""
    counts = session.task_counts()
    request = session.request()
    return AgentModeSessionRow(
        id=session.id,
        repository_path=str(session.repository_path),
        status=session.status.value,
        title=title_of(request),
        request=request,
        file_path=str(file_path),
        tasks_total=len(session.tasks),
        task_counts={status.value.lower(): n for status, n in counts.items()},
        created_at=session.created_at,
        updated_at=session.updated_at,
    )


def plan_locked_reason(session: AgentSession) -> str | None:
    """Why the session's plan can no longer be edited, or None while it can (Active, no
    task started: all Pending, none with a worktree or sub-agent)."""
    if session.status is not SessionStatus.ACTIVE:
        return f"session {session.id} is {session.status.value}"
    for task in session.tasks:
        if task.status is not TaskStatus.PENDING:
            return f"{task.id} is {task.status.value}"
        if task.sub_agent is not None or task.assigned_worktree is not None or task.started_at:
            return f"{task.id} has started"
    return None


def tasks_from_plan(
    planned: Sequence[PlannedTask], at: datetime, previous: Sequence[Task] = ()
) -> list[Task]:
    """Pending Tasks for a plan; a task keeping its id keeps its created_at."""
    created: dict[str, datetime] = {t.id: t.created_at for t in previous}
    return [
        Task(
            id=TaskId(p.id),
            name=p.name,
            description=p.description,
            status=TaskStatus.PENDING,
            dependencies=[TaskId(d) for d in p.dependencies],
            worktree_strategy=p.worktree_strategy,
            assigned_worktree=None,
            sub_agent=None,
            created_at=created.get(p.id, at),
            started_at=None,
            completed_at=None,
            result=None,
        )
        for p in planned
    ]


class AgentModeService:
    """Sessions on disk with their database index kept in step."""

    def __init__(self, settings: Settings, db: Database, files: SessionFiles) -> None:
        self.settings = settings
        self.db = db
        self.files = files
        self.instance = instance_id(settings)  # the mark on this instance's session files

    @classmethod
    def open(cls, settings: Settings, db: Database) -> AgentModeService:
        """The service over `[agent_mode] sessions_dir` and the given store."""
        return cls(settings, db, SessionFiles(settings.agent_mode.sessions_path))

    # ------------------------------------------------------------ files + index
    def save(self, session: AgentSession) -> Path:
        """Write the session's file (checked, atomic, marked as this instance's) and
        refresh its index row."""
        session.opencrab_instance = self.instance
        path = self.files.save(session)
        with self.db.write() as conn:
            index.put(conn, index_row(session, path))
        return path

    def get(self, session_id: str) -> AgentSession:
        """The session from its file (NotFoundError, SessionFileCorrupt); a session
        another OpenCrab instance marked as its own is not found here."""
        session = self.files.load(session_id)
        if not self._ours(session):
            raise NotFoundError(
                f"agent-mode session {session_id} belongs to another OpenCrab instance "
                "(another data directory); this one leaves it alone"
            )
        return session

    def _ours(self, session: AgentSession) -> bool:
        """Marked by this instance, or not marked (a session saved before marks)."""
        return session.opencrab_instance in (None, self.instance)

    def list(
        self,
        *,
        status: SessionStatus | None = None,
        repository: Path | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[AgentModeSessionRow]:
        """Indexed sessions, most recently updated first."""
        with self.db.read() as conn:
            return index.list_sessions(
                conn,
                status=None if status is None else status.value,
                repository_path=None if repository is None else str(repository),
                limit=limit,
                offset=offset,
            )

    def reindex(self) -> Reindexed:
        """Rebuild the index from this instance's session files (another instance's are
        left out); corrupt files are moved aside and returned, rows of sessions whose file
        is gone are dropped."""
        sessions, corrupt = self.files.scan()
        rows = [index_row(s, self.files.path_for(s.id)) for s in sessions if self._ours(s)]
        with self.db.write() as conn:
            count = index.replace_all(conn, rows)
        return Reindexed(count, corrupt)

    # ------------------------------------------------------------ planning
    def edit_plan(self, session_id: str, planned: Sequence[PlannedTask]) -> AgentSession:
        """Replace the plan's tasks (same rules as a planned one) before any task started;
        ConflictError once one has, PlanError naming every problem of the new list."""
        session = self.get(session_id)
        reason = plan_locked_reason(session)
        if reason is not None:
            raise ConflictError(
                f"the plan of session {session_id} can no longer be edited: {reason}"
            )
        planned = list(planned)
        check_plan(planned)
        limit = self.settings.agent_mode.max_tasks
        if len(planned) > limit:
            raise PlanError([f"the plan has {len(planned)} tasks; at most {limit} are allowed"])
        now = utcnow()
        session.tasks = tasks_from_plan(planned, now, session.tasks)
        language = self.settings.agent.language
        note = prompts(language).render("agent_mode_plan_edited", count=str(len(planned)))
        session.conversation.add(MessageRole.SYSTEM, note, now)
        session.updated_at = now
        self.save(session)
        return session

    def master_agent(self, agents: AgentStore, name: str | None = None) -> Agent:
        """The planning agent: `name`, else `[agent_mode] master_agent`, which is created
        (default persona, heartbeat off) on first use; a `name` given explicitly must exist."""
        if name:
            return agents.get(name)
        wanted = self.settings.agent_mode.master_agent
        try:
            return agents.get(wanted)
        except NotFoundError:
            # it plans when asked; a heartbeat of its own would only spend (so it is off)
            spec = AgentCreate(
                name=wanted,
                description=MASTER_DESCRIPTION,
                heartbeat=HeartbeatConfig(enabled=False),
            )
            return agents.create(spec)

    async def create_session(
        self,
        router: LlmRouter,
        agents: AgentStore,
        repository: Path,
        request: str,
        *,
        agent: str | None = None,
    ) -> AgentSession:
        """Plan `request` for the git repository with the master agent and save the new
        session (Active, every task Pending); returns it."""
        check_message(request)
        if not request.strip():
            raise ValidationError("the request is empty")
        root = await run_blocking(repository_root, repository)
        master = await run_blocking(self.master_agent, agents, agent)
        if router.metrics is not None:
            await router.metrics.flush()  # queued spend counts against the budget
        await run_blocking(agents.check_budget, master)
        session_id = str(uuid.uuid4())
        conversation = Conversation()
        outcome: PlanOutcome = await plan_request(
            router,
            master,
            request,
            conversation,
            repository=root,
            settings=self.settings,
        )
        now = utcnow()
        session = AgentSession(
            id=SessionId(session_id),
            created_at=conversation.messages[0].timestamp if conversation.messages else now,
            updated_at=now,
            status=SessionStatus.ACTIVE,
            repository_path=root,
            conversation=conversation,
            tasks=tasks_from_plan(outcome.tasks, now),
            worktrees=[],
        )
        await run_blocking(self.save, session)
        return session
