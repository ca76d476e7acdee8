"""`opencrab worker`: a process with no HTTP server that runs the agents' heartbeats, the
tickets (the ticket scheduler, `[tickets] enabled`) and the turns that continue a chat or a
discussion after a person decided a held call (core/approval_followups.py), by lease.

Several `opencrab up` and `opencrab worker` processes share one database (PostgreSQL for
more than one machine): each agent's heartbeat ticks in the one process holding its
lease (store.lease_keeper), each process holding its fair share of the agents (a worker
that starts takes over its part), and a dead process's agents move to the others once
its leases expire; tickets are shared the same way (tickets/scheduler.py). The worker
reads the agents again every `--refresh-secs` (the heartbeat service's `watch`, as
`opencrab up` does), so agents created, changed or deleted through any server are
followed. SIGINT/SIGTERM stop it cleanly: the heartbeat log is flushed and every lease it
holds is let go of at once (the others take its agents over at their next pass).
"""

from __future__ import annotations

import asyncio
import signal
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
    """Run every agent's heartbeat and the tickets without an HTTP server, sharing the work
    by lease.

    Start as many as you like beside `opencrab up` on one database (\\[database] url):
    each agent ticks in exactly one process. The database is migrated first.

    Example: opencrab worker --data-dir ./data
    """
    settings = settings_from(config, data_dir)
    db = open_store(settings)
    console.print(
        f"[bold]OpenCrab {__version__}[/] worker: heartbeats by lease, tickets by lease, no HTTP "
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
    """Tick every agent whose heartbeat lease this process holds and run the tickets it
    claims until `stop` is set (SIGINT/SIGTERM set it), following agents as they come,
    change and go."""

    from opencrab.core.runtime import Runtime
    from opencrab.core.tool_sources import start_tool_sources
    from opencrab.tickets.scheduler import start_tickets

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Runtime.open(settings, db=db) as runtime:
            sources = await start_tool_sources(runtime)  # first: the registry is whole
            for notice in runtime.notices:
                err_console.print(f"[yellow]note:[/] {escape(notice)}", highlight=False)
            try:
                beats = await runtime.start_heartbeats(refresh_secs=refresh_secs)
                tickets = start_tickets(runtime)
                runtime.approvals.follow_ups.start()  # stopped when the runtime closes
                try:
                    await stop.wait()
                finally:
                    if tickets is not None:
                        await tickets.stop()
                    await beats.stop()
            finally:
                await sources.stop()  # last: nothing calls their tools any more
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.command("worker")(worker)
