"""`opencrab up`: run the server (REST API, dashboard, the agents' heartbeats) in one process.

Either way it runs every chat gateway registered through the `register_gateways` plugin
hook and enabled (Discord built in). With `[gateway.rest] enabled = false` it serves no
HTTP at all: the heartbeats and those gateways run until SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import socket
from typing import TYPE_CHECKING, Annotated, Any

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
from opencrab.errors import ConfigError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when the server starts, not for `--help`
    from opencrab.config import Settings
    from opencrab.store import Database


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def needs_token(host: str, require_token: bool) -> bool:
    """Tokens are required off loopback, and on loopback when the config asks for them."""
    return require_token or not is_loopback(host)


@exits_on_error
def up(
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to bind (config: gateway.rest.host; default 127.0.0.1). "
            "Any other than loopback needs a bearer token.",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port to listen on (config: gateway.rest.port; default 8080).",
            show_default=False,
        ),
    ] = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    log_level: Annotated[
        str, typer.Option(help="Server log level: critical, error, warning, info, debug, trace.")
    ] = "info",
    refresh_secs: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="How often to look for agents created, changed or deleted by another "
            "process on the same database.",
        ),
    ] = 5.0,
) -> None:
    """Start the OpenCrab server: REST API, web dashboard, gateways and every agent's heartbeat.

    The database is migrated to the newest schema first.

    Example: opencrab up --port 8080 --data-dir ./data
    """
    import uvicorn

    from opencrab.auth import TokenStore
    from opencrab.server.app import create_app

    rest: dict[str, Any] = {}
    if host is not None:
        rest["host"] = host
    if port is not None:
        rest["port"] = port
    settings = settings_from(config, data_dir, {"gateway": {"rest": rest}} if rest else None)
    bind = settings.gateway.rest
    db = open_store(settings)
    if not bind.enabled:
        console.print(
            f"[bold]OpenCrab {__version__}[/] without HTTP (\\[gateway.rest] enabled = false): "
            f"heartbeats and chat gateways only (data: {escape(str(settings.data_dir))})",
            highlight=False,
        )
        asyncio.run(serve_without_http(settings, db, refresh_secs=refresh_secs))
        db.close()
        console.print("stopped", highlight=False)
        return
    auth = needs_token(bind.host, bind.require_token)
    if auth and not TokenStore(db).has_active():
        db.close()
        why = (
            f"binding {bind.host} (not a loopback address)"
            if not is_loopback(bind.host)
            else "gateway.rest.require_token is set"
        )
        raise ConfigError(
            f"refusing to start: {why} needs bearer tokens and there are none; "
            "create one with `opencrab token create NAME`",
            key="gateway.rest.host",
        )
    app = create_app(
        settings,
        db,
        heartbeat=True,
        tickets=True,
        auth=auth,
        gateways=True,
        refresh_secs=refresh_secs,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=bind.host, port=bind.port, log_level=log_level)
    )
    sockets = [server.config.bind_socket()]
    base = f"http://{url_host(bind.host)}"
    console.print(
        f"[bold]OpenCrab {__version__}[/] on {base}:{bind.port} "
        f"(data: {escape(str(settings.data_dir))}; "
        f"bearer token {'required' if auth else 'not required'})",
        highlight=False,
    )
    board = settings.dashboard
    if board.enabled:
        console.print(f"Dashboard: [bold]{base}:{bind.port}/[/]", highlight=False)
        if board.port != bind.port:
            extra = listen(bind.host, board.port)
            if isinstance(extra, str):
                err_console.print(
                    f"[yellow]note:[/] the dashboard is not also on port {board.port} "
                    f"(\\[dashboard] port): {escape(extra)}",
                    highlight=False,
                )
            else:
                sockets.append(extra)
                console.print(f"Dashboard also on {base}:{board.port}/", highlight=False)
    console.print(f"API docs: {base}:{bind.port}/docs", highlight=False)
    server.run(sockets=sockets)


def url_host(host: str) -> str:
    """How `host` is written in a URL a user can open (a wildcard bind: localhost)."""
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - recognised, not bound
        return "localhost"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def listen(host: str, port: int) -> socket.socket | str:
    """A listening socket on host:port, or why there cannot be one."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        return str(exc)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        return exc.strerror or str(exc)
    sock.set_inheritable(True)
    return sock


async def serve_without_http(
    settings: Settings, db: Database, *, refresh_secs: float = 5.0
) -> None:
    """Run every agent's heartbeat, the ticket scheduler (`[tickets] enabled`) and the
    registered, enabled chat gateways till SIGINT/SIGTERM."""

    from opencrab.core.runtime import Runtime
    from opencrab.gateway.serve import start_chat_gateways, stop_chat_gateways
    from opencrab.tickets.scheduler import start_tickets

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Runtime.open(settings, db=db) as runtime:
        for notice in runtime.notices:
            err_console.print(f"[yellow]note:[/] {escape(notice)}", highlight=False)
        beats = await runtime.start_heartbeats(refresh_secs=refresh_secs)
        tickets = start_tickets(runtime)
        chats = await start_chat_gateways(runtime)
        try:
            await stop.wait()
        finally:
            if tickets is not None:
                await tickets.stop()
            await stop_chat_gateways(chats)
            await beats.stop()


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.command("up")(up)
