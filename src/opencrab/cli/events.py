"""`opencrab events import|show|stats`: the AgentEvent log from the command line."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

import typer
from rich.markup import escape
from rich.table import Table

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    JsonOption,
    console,
    err_console,
    exits_on_error,
    open_store,
    print_json,
    settings_from,
    store_from,
)
from opencrab.errors import EventValidationError, NotFoundError, ValidationError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when a command runs, not for `--help`
    from opencrab.events import AgentEvent

events_app = typer.Typer(
    help="The event log: what each agent turn did (user input, reasoning, tool calls and "
    "results, replies, token usage), as AgentEvents grouped by trace.",
    no_args_is_help=True,
)

TraceArg = Annotated[UUID, typer.Argument(help="The trace id (a UUID).", show_default=False)]
MAX_SHOWN_PROBLEMS = 20


@events_app.command("import")
@exits_on_error
def import_events(
    file: Annotated[
        str, typer.Argument(help="JSON Lines file of AgentEvents, or - for standard input.")
    ],
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Validate and store AgentEvents from JSON Lines; nothing is written if any is invalid.

    The events may come in any order: each is stored after its parent. Unknown fields
    are ignored with a warning.

    Example: opencrab events import trace.jsonl
    """
    from opencrab.event_log import EventLog, chain_order
    from opencrab.events import parse_jsonl

    settings = settings_from(config, data_dir)
    batch = parse_jsonl(_read_input(file))
    if batch.problems:
        _fail(file, batch.problems)
    order, looped = chain_order(batch.events)
    if looped:
        _fail(file, [(batch.lines[i], why) for i, _, why in looped])
    events = [batch.events[i] for i in order]
    lines = [batch.lines[i] for i in order]
    db = open_store(settings)
    try:
        EventLog(db).append_many(events)
    except EventValidationError as exc:
        _fail(file, [(lines[i], why) for i, _, why in exc.problems])
    finally:
        db.close()
    label = "<stdin>" if file == "-" else file
    for number, warning in batch.warnings:
        err_console.print(f"{label}:{number}: warning: {warning}", highlight=False, markup=False)
    counts = Counter(e.type for e in events)
    traces = len({e.trace_id for e in events})
    if as_json:
        print_json(
            {
                "events": len(events),
                "traces": traces,
                "by_type": dict(counts),
                "warnings": [{"line": n, "message": w} for n, w in batch.warnings],
            }
        )
        return
    detail = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
    noun = "trace" if traces == 1 else "traces"
    console.print(
        f"imported {len(events)} events into {traces} {noun}" + (f": {detail}" if detail else "")
    )


def _read_input(file: str) -> bytes:
    if file == "-":
        return sys.stdin.buffer.read()
    path = Path(file)
    if path.is_dir():
        raise ValidationError(f"{file} is a directory, not a file of events")
    if not path.is_file():
        raise NotFoundError(f"{file}: no such file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {file}: {exc.strerror or exc}") from None


def _fail(file: str, problems: list[tuple[int, str]]) -> None:
    label = "<stdin>" if file == "-" else file
    for number, why in problems[:MAX_SHOWN_PROBLEMS]:
        err_console.print(f"{label}:{number}: {why}", highlight=False, markup=False)
    if len(problems) > MAX_SHOWN_PROBLEMS:
        err_console.print(f"... and {len(problems) - MAX_SHOWN_PROBLEMS} more problems")
    err_console.print(f"[bold red]error:[/] {len(problems)} invalid event(s); nothing was written")
    raise typer.Exit(1)


@events_app.command()
@exits_on_error
def show(
    trace_id: TraceArg,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a trace's events in parent-chain order.

    Example: opencrab events show 0b8e9f3e-5a2c-4c1d-9a57-3f0c6d2b1a10 --json
    """
    from opencrab.event_log import EventLog
    from opencrab.events import event_dict

    with store_from(config, data_dir) as db:
        events = EventLog(db).trace(trace_id)
    if not events:
        raise NotFoundError(f"trace {trace_id} has no events")
    if as_json:
        print_json([event_dict(e) for e in events])
        return
    table = Table(title=f"trace {trace_id}", show_lines=False)
    for column in ("#", "time", "type", "id", "parent"):
        table.add_column(column, no_wrap=True)
    table.add_column("content", overflow="fold")
    for n, event in enumerate(events, start=1):
        table.add_row(
            str(n),
            event.timestamp.strftime("%Y-%m-%d %H:%M:%S"),
            event.type,
            str(event.id)[:8],
            str(event.parent_id)[:8] if event.parent_id else "—",
            escape(_summary(event)),
        )
    console.print(table)


def _summary(event: AgentEvent) -> str:
    content: dict[str, Any] = event.content.model_dump(mode="json")
    if event.type == "tool_call":
        return f"{content['name']}({content['arguments']})"
    if event.type == "tool_result":
        flag = " [error]" if content["is_error"] else ""
        return f"→ {content['tool_call_id'][:8]}{flag}: {content['output']}"
    if event.type == "token_usage":
        return (
            f"in {content['input_tokens']} / out {content['output_tokens']}"
            f" / total {content['total_tokens']}"
        )
    return str(content.get("text", ""))


@events_app.command()
@exits_on_error
def stats(
    trace_id: TraceArg,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Token totals of a trace, overall and per generation event."""
    from opencrab.event_log import EventLog

    with store_from(config, data_dir) as db:
        log = EventLog(db)
        if not log.exists(trace_id):
            raise NotFoundError(f"trace {trace_id} has no events")
        totals = log.token_totals(trace_id)
    if as_json:
        print_json(totals.as_json())
        return
    table = Table(title=f"tokens of trace {trace_id}")
    for column in ("event", "input", "output", "total", "cache read", "reasoning"):
        table.add_column(column, justify="right" if column != "event" else "left")
    for event_id, count in totals.by_event.items():
        table.add_row(
            event_id,
            str(count.input_tokens),
            str(count.output_tokens),
            str(count.total_tokens),
            str(count.cache_read_input_tokens),
            str(count.reasoning_output_tokens),
        )
    table.add_row(
        "[bold]all[/]",
        str(totals.input_tokens),
        str(totals.output_tokens),
        str(totals.total_tokens),
        "",
        "",
    )
    console.print(table)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(events_app, name="events")
