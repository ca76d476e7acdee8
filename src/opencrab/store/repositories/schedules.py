"""The schedules repository: `schedules` and `schedule_runs` (their only writer).

A slot is claimed in one write transaction (`claim_slot`): the run row is inserted,
unique per (schedule, slot), so of several processes claiming the same slot one
records it and the others find it taken; the schedule's `last_slot` moves forward to it.
A manual run (run-now) takes no slot of the schedule: its slot is the moment it was
asked for.

Example:
    with db.write() as conn:
        run_id = claim_slot(conn, schedule_id, slot, trigger="slot", process=owner, now=now)
    ...  # the run
    with db.write() as conn:
        finish_run(conn, run_id, RunEnd("succeeded", now, cost_usd=0.01, session_id=s))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import uuid4

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import agents, schedule_runs, schedules
from opencrab.store.types import parse_timestamp


@dataclass(frozen=True)
class ScheduleRow:
    """One `schedules` row."""

    id: str
    agent_id: str
    name: str
    kind: str
    cron: str | None
    timezone: str | None
    every_secs: int | None
    at: datetime | None
    anchor_at: datetime
    action: dict[str, Any]
    catch_up: str
    paused: bool
    created_by: str
    last_slot: datetime | None
    created_at: datetime
    updated_at: datetime
    resumed_at: datetime | None = None


@dataclass(frozen=True)
class RunRow:
    """One `schedule_runs` row, with its schedule's name."""

    id: str
    schedule_id: str
    schedule_name: str
    agent_id: str
    slot: datetime
    trigger: str
    status: str
    process: str
    started_at: datetime
    ended_at: datetime | None
    cost_usd: float
    session_id: str | None
    ticket_id: str | None
    detail: str | None
    acknowledged_at: datetime | None


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: its status and what it cost and produced."""

    status: str  # succeeded | failed | skipped | abandoned
    ended_at: datetime
    cost_usd: float = 0.0
    session_id: str | None = None
    ticket_id: str | None = None
    detail: str | None = None


def _schedule(row: Any) -> ScheduleRow:
    values = row._asdict()
    values["action"] = values.pop("action_json") or {}
    values["paused"] = bool(values["paused"])
    return ScheduleRow(**values)


def _run(row: Any) -> RunRow:
    return RunRow(**row._asdict())


_RUN_COLUMNS = (*schedule_runs.c, schedules.c.name.label("schedule_name"))


# ------------------------------------------------------------ schedules
def insert_schedule(conn: Connection, values: Mapping[str, Any]) -> str:
    """Insert a schedule (`values` as the table's columns, `action_json` included); its id."""
    schedule_id = str(values.get("id") or uuid4())
    conn.execute(schedules.insert().values({**values, "id": schedule_id}))
    return schedule_id


def agent_exists(conn: Connection, agent_id: str) -> bool:
    """Whether the agent `agent_id` is stored (read in the schedule's transaction)."""
    return conn.execute(sa.select(agents.c.id).where(agents.c.id == agent_id)).first() is not None


def schedule(conn: Connection, schedule_id: str) -> ScheduleRow | None:
    """One schedule, or None."""
    row = conn.execute(sa.select(schedules).where(schedules.c.id == schedule_id)).first()
    return None if row is None else _schedule(row)


def list_schedules(
    conn: Connection, *, agent_id: str | None = None, limit: int = 1000, offset: int = 0
) -> list[ScheduleRow]:
    """Schedules, newest first (an agent's alone when `agent_id` is given)."""
    query = sa.select(schedules).order_by(schedules.c.created_at.desc(), schedules.c.id)
    if agent_id is not None:
        query = query.where(schedules.c.agent_id == agent_id)
    return [_schedule(r) for r in conn.execute(query.limit(limit).offset(offset))]


def active_schedules(conn: Connection) -> list[ScheduleRow]:
    """Every schedule not paused: what a scheduler waits for."""
    query = sa.select(schedules).where(schedules.c.paused == sa.false())
    return [_schedule(r) for r in conn.execute(query)]


def count_for_agent(conn: Connection, agent_id: str) -> int:
    """How many schedules the agent has (paused ones too)."""
    query = sa.select(sa.func.count()).where(schedules.c.agent_id == agent_id)
    return int(conn.execute(query).scalar_one())


def change_mark(conn: Connection) -> tuple[int, datetime | None]:
    """(how many schedules, the latest definition change): a scheduler reads the
    schedules again when this differs from what it read last (one indexed read)."""
    c = schedules.c
    count, latest = conn.execute(sa.select(sa.func.count(), sa.func.max(c.updated_at))).one()
    if isinstance(latest, str):  # max() over SQLite's text form loses the column type
        latest = parse_timestamp(latest)
    return int(count), latest


def set_paused(
    conn: Connection,
    now: datetime,
    paused: bool,
    *,
    schedule_id: str | None = None,
    agent_id: str | None = None,
) -> int:
    """Pause or resume one schedule, or every schedule of an agent; how many changed.
    A resumed schedule's slots missed while paused are skipped (no slot at or before
    `resumed_at`, now, is claimed), never run late."""
    c = schedules.c
    query = schedules.update().where(c.paused == (not paused))
    if schedule_id is not None:
        query = query.where(c.id == schedule_id)
    if agent_id is not None:
        query = query.where(c.agent_id == agent_id)
    values: dict[str, Any] = {"paused": paused, "updated_at": now}
    if not paused:
        values["resumed_at"] = now
    return int(conn.execute(query.values(values)).rowcount)


def delete_schedule(conn: Connection, schedule_id: str) -> bool:
    """Delete a schedule and its runs; False when there was none."""
    conn.execute(schedule_runs.delete().where(schedule_runs.c.schedule_id == schedule_id))
    done = conn.execute(schedules.delete().where(schedules.c.id == schedule_id))
    return bool(done.rowcount)


# ------------------------------------------------------------ runs
def claim_slot(
    conn: Connection,
    schedule_id: str,
    slot: datetime,
    *,
    trigger: str,
    process: str,
    now: datetime,
    status: str = "running",
    detail: str | None = None,
    run_id: str | None = None,
) -> str | None:
    """Claim `slot` of the schedule and record its run (`status` running, or skipped
    with `detail`); the run's id, or None when the slot was claimed already (the run
    row is unique per slot), the schedule is paused or gone, or the slot is at or before
    its last resume. A `manual` run's slot is the moment it was asked for."""
    c = schedules.c
    found = conn.execute(
        sa.select(c.agent_id, c.paused, c.resumed_at, c.last_slot).where(c.id == schedule_id)
    ).first()
    if found is None:
        return None
    if trigger != "manual" and (
        found.paused or (found.resumed_at is not None and slot <= found.resumed_at)
    ):
        return None
    run_id = run_id or str(uuid4())
    ended = now if status != "running" else None
    try:
        with conn.begin_nested():  # a savepoint: a slot taken already leaves the rest
            conn.execute(
                schedule_runs.insert().values(
                    id=run_id,
                    schedule_id=schedule_id,
                    agent_id=found.agent_id,
                    slot=slot,
                    trigger=trigger,
                    status=status,
                    process=process,
                    started_at=now,
                    ended_at=ended,
                    detail=detail,
                )
            )
    except sa.exc.IntegrityError:
        return None
    if trigger != "manual" and (found.last_slot is None or slot > found.last_slot):
        conn.execute(
            schedules.update()
            .where(c.id == schedule_id, sa.or_(c.last_slot.is_(None), c.last_slot < slot))
            .values(last_slot=slot)
        )
    return run_id


def finish_run(conn: Connection, run_id: str, end: RunEnd) -> bool:
    """Record how a running run ended; False when it is no longer running (abandoned by
    another process meanwhile, or deleted with its schedule)."""
    r = schedule_runs.c
    done = conn.execute(
        schedule_runs.update()
        .where(r.id == run_id, r.status == "running")
        .values(
            status=end.status,
            ended_at=end.ended_at,
            cost_usd=end.cost_usd,
            session_id=end.session_id,
            ticket_id=end.ticket_id,
            detail=end.detail,
        )
    )
    return bool(done.rowcount)


def running_runs(conn: Connection, schedule_id: str | None = None) -> list[RunRow]:
    """The runs recorded as running (of one schedule, or all)."""
    query = (
        sa.select(*_RUN_COLUMNS)
        .join(schedules, schedules.c.id == schedule_runs.c.schedule_id)
        .where(schedule_runs.c.status == "running")
    )
    if schedule_id is not None:
        query = query.where(schedule_runs.c.schedule_id == schedule_id)
    return [_run(r) for r in conn.execute(query)]


def abandon_runs(conn: Connection, run_ids: list[str], now: datetime, why: str) -> int:
    """Record running runs whose process is gone as abandoned; how many were."""
    if not run_ids:
        return 0
    r = schedule_runs.c
    done = conn.execute(
        schedule_runs.update()
        .where(r.id.in_(run_ids), r.status == "running")
        .values(status="abandoned", ended_at=now, detail=why)
    )
    return int(done.rowcount)


def runs(
    conn: Connection,
    *,
    schedule_id: str | None = None,
    agent_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[RunRow]:
    """Runs, latest started first (one schedule's, one agent's, or all)."""
    r = schedule_runs.c
    query = sa.select(*_RUN_COLUMNS).join(schedules, schedules.c.id == r.schedule_id)
    if schedule_id is not None:
        query = query.where(r.schedule_id == schedule_id)
    if agent_id is not None:
        query = query.where(r.agent_id == agent_id)
    query = query.order_by(r.started_at.desc(), r.id).limit(limit).offset(offset)
    return [_run(row) for row in conn.execute(query)]


def run(conn: Connection, run_id: str) -> RunRow | None:
    """One run, or None."""
    query = (
        sa.select(*_RUN_COLUMNS)
        .join(schedules, schedules.c.id == schedule_runs.c.schedule_id)
        .where(schedule_runs.c.id == run_id)
    )
    row = conn.execute(query).first()
    return None if row is None else _run(row)


UNACKNOWLEDGED = ("failed", "abandoned")
"""The run statuses a person is told about until they acknowledge the run."""


def failed_unacknowledged(
    conn: Connection, *, agent_id: str | None = None, limit: int = 100
) -> list[RunRow]:
    """Failed and abandoned runs no person has acknowledged yet, latest first: what
    waits for a person (the inbox's failed schedules)."""
    r = schedule_runs.c
    query = (
        sa.select(*_RUN_COLUMNS)
        .join(schedules, schedules.c.id == r.schedule_id)
        .where(r.status.in_(UNACKNOWLEDGED), r.acknowledged_at.is_(None))
    )
    if agent_id is not None:
        query = query.where(r.agent_id == agent_id)
    query = query.order_by(r.started_at.desc(), r.id).limit(limit)
    return [_run(row) for row in conn.execute(query)]


def acknowledge_run(conn: Connection, run_id: str, now: datetime) -> bool:
    """Mark a failed or abandoned run as seen by a person; False when it is none such."""
    r = schedule_runs.c
    done = conn.execute(
        schedule_runs.update()
        .where(r.id == run_id, r.status.in_(UNACKNOWLEDGED), r.acknowledged_at.is_(None))
        .values(acknowledged_at=now)
    )
    return bool(done.rowcount)
