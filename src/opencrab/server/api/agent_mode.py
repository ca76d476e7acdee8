"""Agent-mode sessions (`/api/agent-mode/sessions`, seed 004): list, read, plan, edit.

`POST` plans a request for a git repository on this machine with the master agent and
stores the session (201; the seed's initial state: `Active`, every task `Pending`);
running it is not part of this route. `PUT …/plan` replaces the tasks while none has
started (409 after). The session is the seed's record with camelCase keys (the file on
disk keeps the seed's snake_case); enum values stay the seed's (`Active`, `New`, …).
A plan that breaks a seed-004 rule is 400 `invalid_plan`, naming every problem.

Running (`opencrab.agentmode.runner`, one runner in the server's runtime):
`POST …/{id}/start|pause|resume|cancel|cleanup`, `POST …/{id}/tasks/{task}/answer|retry`,
`GET …/{id}/tasks/{task}/output` (the pane's text), `GET …/{id}/tasks/{task}/diff` (a
finished task's patch), `GET …/{id}/disk` (its worktrees' disk use) and `GET …/{id}/run`
(questions, diffs, deliveries). Every change is announced on the live hub to WebSocket clients
subscribed to the session id (reports.agent_mode.agent_mode_notice; server/api/ws.py
describes it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi import Path as PathParam
from pydantic import Field

from opencrab.agentmode.model import AgentSession, SessionStatus, WorktreeStrategy
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.service import AgentModeService
from opencrab.agentmode.validation import PlannedTask
from opencrab.core.runtime import Runtime
from opencrab.messages import MAX_MESSAGE_CHARS
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import agent_mode
from opencrab.reports.agent_mode import DiskUse, SessionSummary, TaskDiff
from opencrab.server.deps import RuntimeDep
from opencrab.server.schemas import ApiInput, ApiModel, Offset, error_responses

router = APIRouter(prefix="/api/agent-mode", tags=["Agent mode"])

SessionIdParam = Annotated[UUID, PathParam(alias="id", description="The session's id.")]


class CreateSession(ApiInput):
    repository: str = Field(min_length=1, max_length=4096, description="A git work tree.")
    request: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    agent: str | None = Field(
        default=None, max_length=200, description="The planning agent ([agent_mode] default)."
    )


class PlanTaskInput(ApiInput):
    id: str = Field(max_length=32, examples=["task-001"])
    name: str = Field(max_length=200)
    description: str = Field(default="", max_length=MAX_MESSAGE_CHARS)
    dependencies: list[str] = Field(default_factory=list, max_length=1000)
    worktree_strategy: Literal["New", "Shared"] = "New"


class PlanUpdate(ApiInput):
    tasks: list[PlanTaskInput] = Field(max_length=1000)


def _service(runtime: Runtime) -> AgentModeService:
    return AgentModeService.open(runtime.settings, runtime.db)


@router.get(
    "/sessions",
    operation_id="listAgentModeSessions",
    response_model=list[SessionSummary],
    responses=error_responses(400),
)
def list_sessions(
    runtime: RuntimeDep,
    status: SessionStatus | None = None,
    repository: Annotated[str | None, Query(max_length=4096)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> list[SessionSummary]:
    """Sessions from the index, most recently updated first."""
    return agent_mode.session_list(
        runtime, status=status, repository=repository, limit=limit, offset=offset
    )


@router.get(
    "/sessions/{id}",
    operation_id="getAgentModeSession",
    response_model=dict[str, Any],
    responses=error_responses(400, 404),
)
def get_session(session_id: SessionIdParam, runtime: RuntimeDep) -> dict[str, Any]:
    """One session from its file: conversation, tasks, worktrees."""
    return agent_mode.session_json(_service(runtime).get(str(session_id)))


@router.post(
    "/sessions",
    operation_id="createAgentModeSession",
    status_code=201,
    response_model=dict[str, Any],
    responses=error_responses(400, 404, 409, 429, 502, 504),
)
async def create_session(body: CreateSession, runtime: RuntimeDep) -> dict[str, Any]:
    """Plan the request with the master agent and store the session (not started)."""
    session = await _service(runtime).create_session(
        runtime.router,
        runtime.agents,
        Path(body.repository).expanduser(),
        body.request,
        agent=body.agent,
    )
    return agent_mode.session_json(session)


@router.put(
    "/sessions/{id}/plan",
    operation_id="editAgentModeSessionPlan",
    response_model=dict[str, Any],
    responses=error_responses(400, 404, 409),
)
async def edit_plan(
    session_id: SessionIdParam, body: PlanUpdate, runtime: RuntimeDep
) -> dict[str, Any]:
    """Replace the plan's tasks before any has started (same rules as a planned plan)."""
    planned = [
        PlannedTask(
            id=t.id,
            name=t.name,
            description=t.description,
            dependencies=tuple(t.dependencies),
            worktree_strategy=WorktreeStrategy(t.worktree_strategy),
        )
        for t in body.tasks
    ]
    session = await run_blocking(_service(runtime).edit_plan, str(session_id), planned)
    return agent_mode.session_json(session)


TaskIdParam = Annotated[
    str, PathParam(alias="task", pattern=r"^task-[0-9]+$", description="The task's id.")
]


class StartSession(ApiInput):
    cli: Literal["claude", "codex", "gemini", "opencode", "other"] = "claude"
    command: list[str] | None = Field(
        default=None,
        max_length=100,
        description="The program (`other`) or CLI executable with its arguments, as a list "
        '(run without a shell), e.g. ["python", "agent.py", "--fast"].',
    )
    full_auto: bool = True


class AnswerInput(ApiInput):
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class CleanupInput(ApiInput):
    force: bool = False
    orphans: bool = False


def _runner(request: Request) -> AgentModeRunner:
    runner: AgentModeRunner = request.app.state.agent_mode
    return runner


@router.post(
    "/sessions/{id}/start",
    operation_id="startAgentModeSession",
    response_model=dict[str, Any],
    responses=error_responses(400, 404, 409),
)
async def start_session(
    session_id: SessionIdParam, body: StartSession, request: Request
) -> dict[str, Any]:
    """Start running the session's tasks with a coding CLI (409 when already started)."""
    runner = _runner(request)
    session = await runner.start(str(session_id), body.cli, body.command, full_auto=body.full_auto)
    return agent_mode.with_run(runner, session)


def _control(name: str, summary_text: str, operation: str) -> None:
    async def control(session_id: SessionIdParam, request: Request) -> dict[str, Any]:
        runner = _runner(request)
        session: AgentSession = await getattr(runner, name)(str(session_id))
        return agent_mode.with_run(runner, session)

    control.__doc__ = summary_text
    router.post(
        f"/sessions/{{id}}/{name}",
        operation_id=operation,
        response_model=dict[str, Any],
        responses=error_responses(400, 404, 409),
    )(control)


_control("pause", "Start no more tasks (running sub-agents go on).", "pauseAgentModeSession")
_control("resume", "Paused → Active; re-attach to live panes.", "resumeAgentModeSession")
_control("cancel", "End every sub-agent's processes; tasks Cancelled.", "cancelAgentModeSession")


@router.get(
    "/sessions/{id}/run",
    operation_id="getAgentModeRun",
    response_model=dict[str, Any],
    responses=error_responses(400, 404),
)
def get_run(session_id: SessionIdParam, request: Request) -> dict[str, Any]:
    """The session with its run state: questions, diffs, deliveries."""
    runner = _runner(request)
    return agent_mode.with_run(runner, runner.service.get(str(session_id)))


@router.post(
    "/sessions/{id}/cleanup",
    operation_id="cleanupAgentModeSession",
    response_model=dict[str, Any],
    responses=error_responses(400, 404, 409),
)
async def cleanup_session(
    session_id: SessionIdParam, request: Request, body: CleanupInput | None = None
) -> dict[str, Any]:
    """Remove finished tasks' worktrees (refusals reported), find or remove orphans."""
    options = body or CleanupInput()
    report = await _runner(request).cleanup(
        str(session_id), force=options.force, orphans=options.orphans
    )
    return report.as_json()


@router.post(
    "/sessions/{id}/tasks/{task}/answer",
    operation_id="answerAgentModeTask",
    response_model=dict[str, Any],
    responses=error_responses(400, 404, 409),
)
async def answer_task(
    session_id: SessionIdParam, task_id: TaskIdParam, body: AnswerInput, request: Request
) -> dict[str, Any]:
    """Type the answer into the waiting sub-agent's pane."""
    runner = _runner(request)
    await runner.answer(str(session_id), task_id, body.text)
    return agent_mode.with_run(runner, runner.service.get(str(session_id)))


@router.post(
    "/sessions/{id}/tasks/{task}/retry",
    operation_id="retryAgentModeTask",
    response_model=dict[str, Any],
    responses=error_responses(400, 404, 409),
)
async def retry_task(
    session_id: SessionIdParam, task_id: TaskIdParam, request: Request
) -> dict[str, Any]:
    """Put a failed task back to Pending; the session goes on."""
    runner = _runner(request)
    return agent_mode.with_run(runner, await runner.retry(str(session_id), task_id))


class TaskOutput(ApiModel):
    task_id: str
    text: str = Field(description="The pane's last lines (capture-pane).")


@router.get(
    "/sessions/{id}/tasks/{task}/output",
    operation_id="getAgentModeTaskOutput",
    response_model=TaskOutput,
    responses=error_responses(400, 404, 409),
)
async def task_output(
    session_id: SessionIdParam,
    task_id: TaskIdParam,
    request: Request,
    lines: Annotated[int, Query(ge=1, le=5000)] = 200,
) -> TaskOutput:
    """The task's pane output."""
    text = await _runner(request).output(str(session_id), task_id, lines)
    return TaskOutput(task_id=task_id, text=text)


@router.get(
    "/sessions/{id}/disk",
    operation_id="getAgentModeDiskUse",
    response_model=DiskUse,
    responses=error_responses(400, 404),
)
async def disk_use(session_id: SessionIdParam, runtime: RuntimeDep) -> DiskUse:
    """Disk used by the session's worktrees (and all worktrees of its repository)."""
    session = await run_blocking(_service(runtime).get, str(session_id))
    return await agent_mode.session_disk(session)


@router.get(
    "/sessions/{id}/tasks/{task}/diff",
    operation_id="getAgentModeTaskDiff",
    response_model=TaskDiff,
    responses=error_responses(400, 404),
)
async def get_task_diff(
    session_id: SessionIdParam, task_id: TaskIdParam, request: Request
) -> TaskDiff:
    """A finished task's diff against the start branch, its patch and delivery."""
    return await run_blocking(agent_mode.task_diff, _runner(request), str(session_id), task_id)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
