"""`opencrab schedule add|list|runs|pause|resume|remove|run-now`: an agent's timed jobs.

opencrab schedule add AGENT --every 3600 --prompt "Check the build"
opencrab schedule add AGENT --cron "0 9 * * 1-5" --tz Europe/Berlin --prompt "Stand-up"
opencrab schedule add AGENT --at 2026-12-24T09:00:00+01:00 --ticket-goal "Ship it"
opencrab schedule add AGENT --cron "0 17 * * 5" --tz UTC --post discord:123456 --prompt "…"
opencrab schedule list [--agent AGENT] [--json]
opencrab schedule runs SCHEDULE [--json]
opencrab schedule pause|resume|remove SCHEDULE
opencrab schedule run-now SCHEDULE     runs it in this process and prints how it ended

The rules (and the 400-style errors naming the field) are opencrab.schedules.service's;
running processes (`opencrab up`, `opencrab worker`) see a change within `[schedules]
refresh_secs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    JsonOption,
    console,
    exits_on_error,
    open_store,
    print_json,
    settings_from,
    store_from,
    with_runtime,
)
from opencrab.errors import ValidationError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when a command runs, not for `--help`
    from opencrab.core.runtime import Runtime
    from opencrab.store import Database

schedule_app = typer.Typer(
    help="An agent's schedules: cron, interval, one-shot.", no_args_is_help=True
)

ScheduleArg = Annotated[str, typer.Argument(help="The schedule's id.", show_default=False)]


def _names(db: Database) -> dict[str, str]:
    from opencrab.schedules.service import agent_names

    return agent_names(db)


def _action(
    prompt: str | None,
    session: str | None,
    ticket_goal: str | None,
    post: str | None,
) -> dict[str, Any]:
    if ticket_goal is not None:
        return {"kind": "ticket", "template": {"context": {"goal": ticket_goal}}}
    if post is not None:
        gateway, colon, channel = post.partition(":")
        if not colon or not gateway or not channel:
            raise ValidationError(f"--post: give GATEWAY:CHANNEL (discord:123456), not {post!r}")
        return {"kind": "post", "prompt": prompt, "home": {"gateway": gateway, "channel": channel}}
    action: dict[str, Any] = {"kind": "turn", "prompt": prompt}
    if session is not None:
        action["sessionId"] = session
    return action


@schedule_app.command()
@exits_on_error
def add(
    agent: Annotated[str, typer.Argument(help="The agent's name or id.", show_default=False)],
    cron: Annotated[str | None, typer.Option(help="5-field cron expression.")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="The cron's IANA time zone.")] = None,
    every: Annotated[int | None, typer.Option(help="Every so many seconds.")] = None,
    at: Annotated[str | None, typer.Option(help="Once, at this ISO 8601 time.")] = None,
    prompt: Annotated[str | None, typer.Option(help="The turn's prompt.")] = None,
    session: Annotated[str | None, typer.Option(help="Run the turns in this session.")] = None,
    ticket_goal: Annotated[
        str | None, typer.Option(help="Each run creates a ticket with this goal.")
    ] = None,
    post: Annotated[
        str | None, typer.Option(help="Post the turn's reply to GATEWAY:CHANNEL.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="What the schedule is called.")] = None,
    skip_missed: Annotated[
        bool, typer.Option(help="Skip a slot missed while no process ran (default: run once).")
    ] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a schedule for an agent.

    Example: opencrab schedule add aki --cron "0 9 * * 1-5" --tz Europe/Berlin --prompt "Stand-up"
    """
    from opencrab.reports.schedules import schedule_response
    from opencrab.schedules.service import create_schedule
    from opencrab.schedules.spec import parse_input

    data: dict[str, Any] = {
        "cron": cron,
        "timezone": tz,
        "everySecs": every,
        "at": at,
        "name": name,
        "catchUp": "skip" if skip_missed else "once",
        "action": _action(prompt, session, ticket_goal, post),
    }
    given = parse_input({k: v for k, v in data.items() if v is not None})
    settings = settings_from(config, data_dir)
    db = open_store(settings)
    try:
        row = create_schedule(db, settings, agent, given, created_by="cli")
        shown = schedule_response(row, _names(db))
    finally:
        db.close()
    if as_json:
        print_json(shown.model_dump(mode="json", by_alias=True))
        return
    console.print(
        f"schedule {shown.id} ({shown.name}): {shown.description}; next {shown.next_slot}",
        highlight=False,
        markup=False,
    )


@schedule_app.command("list")
@exits_on_error
def list_schedules(
    agent: Annotated[str | None, typer.Option(help="Only this agent's.")] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Schedules, newest first, with their next slot."""
    from opencrab.reports.schedules import schedule_response
    from opencrab.schedules import service

    with store_from(config, data_dir) as db:
        names = _names(db)
        shown = [schedule_response(r, names) for r in service.list_schedules(db, agent=agent)]
    if as_json:
        print_json([s.model_dump(mode="json", by_alias=True) for s in shown])
        return
    table = Table(title="Schedules")
    for column in ("id", "agent", "name", "when", "action", "next", "state"):
        table.add_column(column)
    for s in shown:
        table.add_row(
            s.id,
            escape(s.agent_name),
            escape(s.name),
            escape(s.description),
            str(s.action.get("kind")),
            f"{s.next_slot:%Y-%m-%d %H:%M:%S}" if s.next_slot else "",
            "paused" if s.paused else "active",
        )
    console.print(table)


@schedule_app.command()
@exits_on_error
def runs(
    schedule: ScheduleArg,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """A schedule's runs, latest first."""
    from opencrab.reports.schedules import run_list
    from opencrab.schedules import service

    with store_from(config, data_dir) as db:
        shown = run_list(service.schedule_runs(db, schedule, limit=limit))
    if as_json:
        print_json([r.model_dump(mode="json", by_alias=True) for r in shown])
        return
    table = Table(title="Runs")
    for column in ("slot", "started", "ended", "status", "cost", "produced", "detail"):
        table.add_column(column)
    for r in shown:
        table.add_row(
            f"{r.slot:%Y-%m-%d %H:%M:%S}",
            f"{r.started_at:%H:%M:%S}",
            f"{r.ended_at:%H:%M:%S}" if r.ended_at else "",
            r.status,
            f"${r.cost_usd:.4f}",
            r.session_id or r.ticket_id or "",
            escape((r.detail or "")[:80]),
        )
    console.print(table)


def _set(schedule: str, paused: bool, config: Any, data_dir: Any) -> None:
    from opencrab.schedules import service

    with store_from(config, data_dir) as db:
        row = service.set_paused(db, schedule, paused)
    console.print(
        f"schedule {row.id} {'paused' if row.paused else 'resumed'}", highlight=False, markup=False
    )


@schedule_app.command()
@exits_on_error
def pause(
    schedule: ScheduleArg, config: ConfigOption = None, data_dir: DataDirOption = None
) -> None:
    """Pause a schedule: no slot runs until it is resumed."""
    _set(schedule, True, config, data_dir)


@schedule_app.command()
@exits_on_error
def resume(
    schedule: ScheduleArg, config: ConfigOption = None, data_dir: DataDirOption = None
) -> None:
    """Resume a schedule from its next slot (slots missed while paused are skipped)."""
    _set(schedule, False, config, data_dir)


@schedule_app.command()
@exits_on_error
def remove(
    schedule: ScheduleArg, config: ConfigOption = None, data_dir: DataDirOption = None
) -> None:
    """Delete a schedule and its runs."""
    from opencrab.schedules import service

    with store_from(config, data_dir) as db:
        service.delete_schedule(db, schedule)
    console.print(f"schedule {schedule} removed", highlight=False, markup=False)


@schedule_app.command("run-now")
@exits_on_error
def run_now(
    schedule: ScheduleArg,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run a schedule once now, in this process (recorded like any run), and say how it
    ended."""

    async def body(runtime: Runtime) -> Any:
        import asyncio

        from opencrab.reports.schedules import run_response
        from opencrab.schedules.scheduler import ScheduleScheduler
        from opencrab.schedules.service import get_run

        scheduler = ScheduleScheduler(runtime)
        run_id = await scheduler.run_now(schedule)
        await asyncio.gather(*scheduler.tasks)
        return run_response(get_run(runtime.db, run_id))

    shown = with_runtime(config, data_dir, body)
    if as_json:
        print_json(shown.model_dump(mode="json", by_alias=True))
        return
    produced = shown.session_id or shown.ticket_id or "nothing"
    console.print(
        f"run {shown.id}: {shown.status} (${shown.cost_usd:.4f}, produced {produced})"
        + (f"\n{shown.detail}" if shown.detail else ""),
        highlight=False,
        markup=False,
    )


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")
