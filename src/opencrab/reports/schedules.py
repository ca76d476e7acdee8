"""Schedules and their runs as the API, the CLI, MCP and the Schedules page show them:
each schedule with its agent's name, its timing in words and its next slot; each run
with its slot, start, end, process, outcome, cost and what it produced."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from opencrab.core.runtime import Runtime
from opencrab.reports.model import ApiModel
from opencrab.schedules import service
from opencrab.schedules.spec import describe, next_slot
from opencrab.store.repositories.schedules import RunRow, ScheduleRow


class ScheduleResponse(ApiModel):
    id: str
    agent_id: str
    agent_name: str
    name: str
    kind: str  # cron | every | at
    cron: str | None = None
    timezone: str | None = None
    every_secs: int | None = None
    at: datetime | None = None
    catch_up: str
    paused: bool
    action: dict[str, Any]
    created_by: str
    created_at: datetime
    updated_at: datetime
    last_slot: datetime | None = None
    next_slot: datetime | None = None  # None: paused, or a one-shot schedule done
    description: str


class RunResponse(ApiModel):
    id: str
    schedule_id: str
    schedule_name: str
    agent_id: str
    slot: datetime
    trigger: str  # slot | late | manual
    status: str  # running | succeeded | failed | skipped | abandoned
    process: str
    started_at: datetime
    ended_at: datetime | None = None
    cost_usd: float
    session_id: str | None = None
    ticket_id: str | None = None
    detail: str | None = None
    acknowledged_at: datetime | None = None


class RunStarted(ApiModel):
    """A run-now: the run recorded (its id and schedule), going on in the background."""

    run_id: str
    schedule_id: str


def schedule_response(
    row: ScheduleRow, names: dict[str, str], now: datetime | None = None
) -> ScheduleResponse:
    now = now or datetime.now(UTC)
    after = max(now, row.last_slot) if row.last_slot else now
    upcoming = None if row.paused else next_slot(row, after)
    return ScheduleResponse(
        id=row.id,
        agent_id=row.agent_id,
        agent_name=names.get(row.agent_id, row.agent_id),
        name=row.name,
        kind=row.kind,
        cron=row.cron,
        timezone=row.timezone,
        every_secs=row.every_secs,
        at=row.at,
        catch_up=row.catch_up,
        paused=row.paused,
        action=row.action,
        created_by=row.created_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_slot=row.last_slot,
        next_slot=upcoming,
        description=describe(row),
    )


def run_response(row: RunRow) -> RunResponse:
    return RunResponse(**row.__dict__)


def agent_names(runtime: Runtime) -> dict[str, str]:
    """Every agent's name by id."""
    return service.agent_names(runtime.db)


def schedule_list(
    runtime: Runtime, *, agent: str | None = None, limit: int = 1000, offset: int = 0
) -> list[ScheduleResponse]:
    """Schedules, newest first (one agent's when `agent` is given)."""
    rows = service.list_schedules(runtime.db, agent=agent, limit=limit, offset=offset)
    names = agent_names(runtime)
    return [schedule_response(row, names) for row in rows]


def one_schedule(runtime: Runtime, row: ScheduleRow) -> ScheduleResponse:
    return schedule_response(row, agent_names(runtime))


def run_list(rows: Sequence[RunRow]) -> list[RunResponse]:
    return [run_response(row) for row in rows]


class AgentChoice(ApiModel):
    id: str
    name: str
    language: str


class SchedulesPage(ApiModel):
    """What the Schedules page shows: every schedule, the failed runs waiting for a
    person, the latest runs, and the agents a schedule may be made for."""

    schedules: list[ScheduleResponse]
    failed: list[RunResponse]
    recent: list[RunResponse]
    agents: list[AgentChoice]
    last_status: dict[str, str]  # schedule id -> its latest run's status


def schedules_page(runtime: Runtime) -> SchedulesPage:
    """The Schedules page's view (the same calls the API makes)."""
    agents = runtime.agents.list()
    names = {a.id: a.name for a in agents}
    rows = service.list_schedules(runtime.db)
    recent = service.recent_runs(runtime.db, limit=30)
    latest: dict[str, str] = {}
    for run in recent:
        latest.setdefault(run.schedule_id, run.status)
    return SchedulesPage(
        schedules=[schedule_response(row, names) for row in rows],
        failed=run_list(service.failed_runs(runtime.db, limit=50)),
        recent=run_list(recent),
        agents=[AgentChoice(id=a.id, name=a.name, language=a.language) for a in agents],
        last_status=latest,
    )
