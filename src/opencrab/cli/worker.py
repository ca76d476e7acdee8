"""`opencrab worker`: a process with no HTTP server that runs the agents' heartbeats, the
tickets (the ticket scheduler, `[tickets] enabled`), discussions, agent-mode sessions
and the turns that continue after a person decided a held call, by lease: the worker
role of the process assembly (opencrab.process).

Several `opencrab up` and `opencrab worker` processes share one database (PostgreSQL for
more than one machine): each agent's heartbeat ticks in the one process holding its
lease (store.lease_keeper), each process holding its fair share of the agents (a worker
that starts takes over its part), and a dead process's agents move to the others once
its leases expire; tickets are shared the same way (tickets/scheduler.py), and so are
discussions started through any server and agent-mode sessions started on this data
directory (a process that stops or dies leaves them to the others). The worker
reads the agents again every `--refresh-secs` (the heartbeat service's `watch`, as
`opencrab up` does), so agents created, changed or deleted through any server are
followed. SIGINT/SIGTERM stop it cleanly: the heartbeat log is flushed and every lease it
holds is let go of at once (the others take its agents over at their next pass).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from opencrab import __version__
from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    console,
    err_console,
    exits_on_error,
    open_store,
    settings_from,
)
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when the worker starts, not for `--help`
    from opencrab.config import Settings
    from opencrab.store import Database


@exits_on_error
def worker(
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    refresh_secs: Annotated[
        float,
        typer.Option(
            min=0.1, help="How often to look for agents created, changed or deleted elsewhere."
        ),
    ] = 5.0,
) -> None:
    """Run every agent's heartbeat, the tickets, discussions and agent-mode sessions without
    an HTTP server, sharing the work by lease.

    Start as many as you like beside `opencrab up` on one database (\\[database] url):
    each agent ticks in exactly one process. The database is migrated first.

    Example: opencrab worker --data-dir ./data
    """
    settings = settings_from(config, data_dir)
    db = open_store(settings)
    console.print(
        f"[bold]OpenCrab {__version__}[/] worker: heartbeats by lease, tickets, discussions and "
        "agent-mode sessions by lease, no HTTP "
        f"(database: {escape(db.url.render_as_string(hide_password=True))})",
        highlight=False,
    )
    try:
        asyncio.run(run_worker(settings, db, refresh_secs=refresh_secs))
    finally:
        db.close()
    console.print("stopped", highlight=False)


async def run_worker(
    settings: Settings,
    db: Database,
    *,
    refresh_secs: float = 5.0,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the worker role's background services (opencrab.process) until `stop` is set
    (SIGINT/SIGTERM set it)."""
    from opencrab.process import Role, run_until_stopped

    await run_until_stopped(
        Role.WORKER, settings, db, refresh_secs=refresh_secs, stop=stop, notice=_note
    )


def _note(text: str) -> None:
    err_console.print(f"[yellow]note:[/] {escape(text)}", highlight=False)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.command("worker")(worker)
