"""Schedules: create, list, pause, resume, delete; their runs (issue 37, section 1).

Every entry point (REST, CLI, MCP, the dashboard, the `schedule_task` action) calls these;
the rules live here: the agent must exist (a deleted one is refused naming `agent`), an
agent has at most `[schedules] max_per_agent` schedules, and the timing and action are
checked by schedules/spec.py. Running them is schedules/scheduler.py's.

Pausing stops a schedule's slots until it is resumed; slots missed meanwhile are skipped.
Pausing an agent's schedules (`pause_agent`) pauses every one of them: an agent's
schedules are paused as one when the agent should do nothing on its own.

`failed_runs` is the question the inbox asks: the failed and abandoned runs no person has
acknowledged yet (`acknowledge_run` answers it).

Example:
    row = create_schedule(db, settings, "aki", parse_input({"everySecs": 3600,
        "action": {"kind": "turn", "prompt": "Check the build"}}), created_by="api")
"""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from opencrab.config import Settings
from opencrab.errors import NotFoundError, ValidationError
from opencrab.schedules.spec import ScheduleInput, checked
from opencrab.store import Database
from opencrab.store.repositories import agents as agents_repo
from opencrab.store.repositories import schedules as repo
from opencrab.store.repositories.schedules import RunRow, ScheduleRow

MAX_CREATOR = 200


def _now() -> datetime:
    return datetime.now(UTC)


def schedule_id_of(value: str) -> str:
    """A schedule id in its one spelling; NotFoundError for anything that is no UUID."""
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise NotFoundError(f"no schedule {value!r}") from None


def agent_id_for(db: Database, agent: str) -> str:
    """The id of the agent named or with id `agent`; ValidationError naming `agent` when
    there is none (deleted, or never was)."""
    with db.read() as conn:
        row = agents_repo.find_agent(conn, agent)
    if row is None:
        raise ValidationError(f"agent: there is no agent {agent!r} (deleted, or never created)")
    return str(row.id)


def create_schedule(
    db: Database,
    settings: Settings,
    agent: str,
    given: ScheduleInput,
    *,
    created_by: str,
    now: datetime | None = None,
) -> ScheduleRow:
    """A new schedule of `agent` (a name or id); ValidationError naming the field at
    fault (agent, cron, timezone, everySecs, at, action.…), or `agent` once it has
    `[schedules] max_per_agent` schedules."""
    now = now or _now()
    section = settings.schedules
    agent_id = agent_id_for(db, agent)
    values = checked(given, now, min_interval_secs=section.min_interval_secs)
    with db.write() as conn:
        if not repo.agent_exists(conn, agent_id):  # deleted since it was looked up
            raise ValidationError(f"agent: there is no agent {agent!r} (deleted)")
        if repo.count_for_agent(conn, agent_id) >= section.max_per_agent:
            raise ValidationError(
                f"agent: {agent!r} has {section.max_per_agent} schedules, the most an agent "
                "may have ([schedules] max_per_agent); remove one first"
            )
        schedule_id = repo.insert_schedule(
            conn,
            {
                **values,
                "agent_id": agent_id,
                "created_by": created_by[:MAX_CREATOR],
                "paused": False,
                "created_at": now,
                "updated_at": now,
            },
        )
        row = repo.schedule(conn, schedule_id)
    assert row is not None
    return row


def get_schedule(db: Database, schedule_id: str) -> ScheduleRow:
    """One schedule; NotFoundError when there is none."""
    schedule_id = schedule_id_of(schedule_id)
    with db.read() as conn:
        row = repo.schedule(conn, schedule_id)
    if row is None:
        raise NotFoundError(f"no schedule {schedule_id}")
    return row


def list_schedules(
    db: Database, *, agent: str | None = None, limit: int = 1000, offset: int = 0
) -> list[ScheduleRow]:
    """Schedules, newest first; one agent's (a name or id; ValidationError naming `agent`
    when there is none) when `agent` is given."""
    agent_id = None if agent is None else agent_id_for(db, agent)
    with db.read() as conn:
        return repo.list_schedules(conn, agent_id=agent_id, limit=limit, offset=offset)


def set_paused(db: Database, schedule_id: str, paused: bool) -> ScheduleRow:
    """Pause or resume one schedule (a no-op when it already is); the schedule."""
    row = get_schedule(db, schedule_id)
    with db.write() as conn:
        repo.set_paused(conn, _now(), paused, schedule_id=row.id)
        found = repo.schedule(conn, row.id)
    if found is None:
        raise NotFoundError(f"no schedule {row.id}")
    return found


def pause_agent(db: Database, agent: str, paused: bool) -> int:
    """Pause (or resume) every schedule of `agent`; how many changed."""
    agent_id = agent_id_for(db, agent)
    with db.write() as conn:
        return repo.set_paused(conn, _now(), paused, agent_id=agent_id)


def delete_schedule(db: Database, schedule_id: str) -> None:
    """Delete a schedule and its runs; NotFoundError when there is none. A run under way
    finishes, but is recorded nowhere."""
    schedule_id = schedule_id_of(schedule_id)
    with db.write() as conn:
        if not repo.delete_schedule(conn, schedule_id):
            raise NotFoundError(f"no schedule {schedule_id}")


def schedule_runs(
    db: Database, schedule_id: str, *, limit: int = 100, offset: int = 0
) -> list[RunRow]:
    """A schedule's runs, latest first; NotFoundError when there is no such schedule."""
    row = get_schedule(db, schedule_id)
    with db.read() as conn:
        return repo.runs(conn, schedule_id=row.id, limit=limit, offset=offset)


def failed_runs(db: Database, *, agent_id: str | None = None, limit: int = 100) -> list[RunRow]:
    """Failed schedule runs not yet acknowledged (failed or abandoned: the process died),
    latest first: what the inbox shows a person."""
    with db.read() as conn:
        return repo.failed_unacknowledged(conn, agent_id=agent_id, limit=limit)


def acknowledge_run(db: Database, run_id: str) -> None:
    """A person has seen a failed run: it leaves `failed_runs`. NotFoundError when it is
    no unacknowledged failed run."""
    try:
        run_id = str(UUID(str(run_id)))
    except ValueError:
        raise NotFoundError(f"no schedule run {run_id!r}") from None
    with db.write() as conn:
        if not repo.acknowledge_run(conn, run_id, _now()):
            raise NotFoundError(f"no unacknowledged failed schedule run {run_id}")


def get_run(db: Database, run_id: str) -> RunRow:
    """One run; NotFoundError when there is none."""
    try:
        run_id = str(UUID(str(run_id)))
    except ValueError:
        raise NotFoundError(f"no schedule run {run_id!r}") from None
    with db.read() as conn:
        found = repo.run(conn, run_id)
    if found is None:
        raise NotFoundError(f"no schedule run {run_id}")
    return found


def agent_names(db: Database) -> dict[str, str]:
    """Every agent's name by id (for lists of schedules)."""
    with db.read() as conn:
        return {str(r.id): str(r.name) for r in agents_repo.all_agents(conn)}


def recent_runs(db: Database, *, limit: int = 30) -> list[RunRow]:
    """The latest runs of every schedule, latest first."""
    with db.read() as conn:
        return repo.runs(conn, limit=limit)
