"""Schedules (issue 37): an agent's cron, interval and one-shot jobs, and their runs.

`POST /api/agents/{id}/schedules` creates one (exactly one of `cron` with `timezone`,
`everySecs`, `at`; an `action`); bad input is a 400 whose message starts with the field
at fault (`cron: …`, `timezone: …`, `everySecs: …`, `agent: …` for an agent that does not
exist). `GET /api/schedules` lists them, `GET /api/schedules/{id}/runs` a schedule's
runs (slot, start, end, process, outcome, cost, the session or ticket made); pause,
resume, delete and run-now act on one, and `/api/agents/{id}/schedules/pause|resume`
on all of an agent's. `GET /api/schedule-runs/failed` is what waits for a person: the
failed runs nobody acknowledged (`POST /api/schedule-runs/{id}/acknowledge`).
The rules are in `opencrab.schedules`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Path, Query, Request, Response
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.errors import ConflictError
from opencrab.plugins import hookimpl
from opencrab.reports import schedules as views
from opencrab.reports.model import ApiModel
from opencrab.reports.schedules import RunResponse, RunStarted, ScheduleResponse
from opencrab.schedules import service
from opencrab.schedules.scheduler import ScheduleScheduler
from opencrab.schedules.spec import ScheduleInput
from opencrab.server.deps import AGENT_REF, AgentId, RuntimeDep, actor_of
from opencrab.server.schemas import Offset, error_responses

router = APIRouter(prefix="/api", tags=["Schedules"])

ScheduleId = Annotated[str, Path(alias="id", description="The schedule's id.")]
RunId = Annotated[str, Path(alias="id", description="The schedule run's id.")]


class Paused(ApiModel):
    changed: int = Field(description="How many of the agent's schedules changed.")


@router.post(
    "/agents/{id}/schedules",
    operation_id="createSchedule",
    status_code=201,
    response_model=ScheduleResponse,
    responses=error_responses(400),
)
def create(
    agent: AgentId, body: ScheduleInput, runtime: RuntimeDep, request: Request
) -> ScheduleResponse:
    """A new schedule of the agent; 400 naming the field for an invalid cron expression,
    an unknown time zone, an interval under `[schedules] min_interval_secs`, an agent that
    does not exist (deleted) or has `[schedules] max_per_agent` schedules already."""
    row = service.create_schedule(
        runtime.db, runtime.settings, agent, body, created_by=f"api:{actor_of(request)}"
    )
    _changed(request)
    return views.one_schedule(runtime, row)


@router.get(
    "/schedules",
    operation_id="listSchedules",
    response_model=list[ScheduleResponse],
    responses=error_responses(400),
)
def list_all(
    runtime: RuntimeDep,
    agent: Annotated[
        str | None, Query(min_length=1, max_length=MAX_NAME, description=AGENT_REF)
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Offset = 0,
) -> list[ScheduleResponse]:
    """Schedules, newest first, each with its next slot; `agent` narrows the list."""
    return views.schedule_list(runtime, agent=agent, limit=limit, offset=offset)


@router.get(
    "/schedules/{id}",
    operation_id="getSchedule",
    response_model=ScheduleResponse,
    responses=error_responses(404),
)
def get(schedule_id: ScheduleId, runtime: RuntimeDep) -> ScheduleResponse:
    """One schedule."""
    return views.one_schedule(runtime, service.get_schedule(runtime.db, schedule_id))


@router.get(
    "/schedules/{id}/runs",
    operation_id="listScheduleRuns",
    response_model=list[RunResponse],
    responses=error_responses(404),
)
def runs(
    schedule_id: ScheduleId,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> list[RunResponse]:
    """The schedule's runs, latest first: slot, start, end, process, outcome, cost and
    what each produced (its session or ticket)."""
    found = service.schedule_runs(runtime.db, schedule_id, limit=limit, offset=offset)
    return views.run_list(found)


@router.post(
    "/schedules/{id}/pause",
    operation_id="pauseSchedule",
    response_model=ScheduleResponse,
    responses=error_responses(404),
)
def pause(schedule_id: ScheduleId, runtime: RuntimeDep, request: Request) -> ScheduleResponse:
    """Pause the schedule: no slot runs until it is resumed."""
    return _set_paused(schedule_id, runtime, request, paused=True)


@router.post(
    "/schedules/{id}/resume",
    operation_id="resumeSchedule",
    response_model=ScheduleResponse,
    responses=error_responses(404),
)
def resume(schedule_id: ScheduleId, runtime: RuntimeDep, request: Request) -> ScheduleResponse:
    """Resume the schedule from its next slot (the slots missed while paused are skipped)."""
    return _set_paused(schedule_id, runtime, request, paused=False)


@router.delete(
    "/schedules/{id}",
    operation_id="deleteSchedule",
    status_code=204,
    response_class=Response,
    responses=error_responses(404),
)
def delete(schedule_id: ScheduleId, runtime: RuntimeDep, request: Request) -> Response:
    """Delete the schedule and its runs."""
    service.delete_schedule(runtime.db, schedule_id)
    _changed(request)
    return Response(status_code=204)


@router.post(
    "/schedules/{id}/run-now",
    operation_id="runScheduleNow",
    status_code=202,
    response_model=RunStarted,
    responses=error_responses(404, 409),
)
async def run_now(schedule_id: ScheduleId, request: Request) -> RunStarted:
    """Run the schedule once now, besides its slots: the run is recorded (its id is
    answered) and goes on in the background of this server. 409 while a run of the
    schedule is under way, or when this server runs no schedules."""
    scheduler = _scheduler(request)
    if scheduler is None:
        raise ConflictError("this server runs no schedules ([schedules] enabled = false)")
    run_id = await scheduler.run_now(schedule_id)
    return RunStarted(run_id=run_id, schedule_id=service.schedule_id_of(schedule_id))


@router.post(
    "/agents/{id}/schedules/pause",
    operation_id="pauseAgentSchedules",
    response_model=Paused,
    responses=error_responses(400),
)
def pause_agent(agent: AgentId, runtime: RuntimeDep, request: Request) -> Paused:
    """Pause every schedule of the agent."""
    return _pause_agent(agent, runtime, request, paused=True)


@router.post(
    "/agents/{id}/schedules/resume",
    operation_id="resumeAgentSchedules",
    response_model=Paused,
    responses=error_responses(400),
)
def resume_agent(agent: AgentId, runtime: RuntimeDep, request: Request) -> Paused:
    """Resume every paused schedule of the agent."""
    return _pause_agent(agent, runtime, request, paused=False)


@router.get(
    "/schedule-runs/failed",
    operation_id="listFailedScheduleRuns",
    response_model=list[RunResponse],
    responses=error_responses(400),
)
def failed(
    runtime: RuntimeDep,
    agent: Annotated[
        str | None, Query(min_length=1, max_length=MAX_NAME, description=AGENT_REF)
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[RunResponse]:
    """Failed and abandoned runs nobody acknowledged yet, latest first."""
    agent_id = None if agent is None else service.agent_id_for(runtime.db, agent)
    return views.run_list(service.failed_runs(runtime.db, agent_id=agent_id, limit=limit))


@router.post(
    "/schedule-runs/{id}/acknowledge",
    operation_id="acknowledgeScheduleRun",
    status_code=204,
    response_class=Response,
    responses=error_responses(404),
)
def acknowledge(run_id: RunId, runtime: RuntimeDep) -> Response:
    """A person saw the failed run: it leaves the failed list."""
    service.acknowledge_run(runtime.db, run_id)
    return Response(status_code=204)


def _set_paused(
    schedule_id: str, runtime: RuntimeDep, request: Request, *, paused: bool
) -> ScheduleResponse:
    """Pause or resume one schedule (the pause and resume routes)."""
    row = service.set_paused(runtime.db, schedule_id, paused)
    _changed(request)
    return views.one_schedule(runtime, row)


def _pause_agent(agent: AgentId, runtime: RuntimeDep, request: Request, *, paused: bool) -> Paused:
    """Pause or resume every schedule of the agent (the agent's pause and resume routes)."""
    changed = service.pause_agent(runtime.db, agent, paused)
    _changed(request)
    return Paused(changed=changed)


def _scheduler(request: Request) -> ScheduleScheduler | None:
    """This server's schedule scheduler; None when it runs no schedules."""
    return getattr(request.app.state, "schedules", None)


def _changed(request: Request) -> None:
    """Let this server's scheduler follow a change at once (others read it within
    `[schedules] refresh_secs`)."""
    scheduler = _scheduler(request)
    if scheduler is not None:
        scheduler.changed()


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
