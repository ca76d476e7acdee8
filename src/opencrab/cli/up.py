"""`opencrab up`: run the server (REST API, dashboard, the agents' heartbeats) in one process.

Either way it runs every chat gateway registered through the `register_gateways` plugin
hook and enabled (Discord built in). With `[gateway.rest] enabled = false` it serves no
HTTP at all: the heartbeats, tickets, discussions, agent-mode sessions and those gateways
run until SIGINT or SIGTERM. Which background services each way runs, and in which
order, is opencrab.process's table (the `server` and `headless` roles).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shlex
import socket
import sys
from pathlib import Path
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
from opencrab.server.startup_errors import StartupErrors

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


def token_required_because(host: str, require_token: bool, *, root: bool) -> str | None:
    """Why a TCP server must require bearer tokens, or None when loopback may stay open.

    Off loopback anyone on the network could call the API; as root (euid 0) any local
    user could, and the API reaches as far as its process (imports, agent mode's CLIs).
    """
    if not is_loopback(host):
        return f"binding {host} (not a loopback address)"
    if root:
        return "running as root"
    if require_token:
        return "gateway.rest.require_token is set"
    return None


def no_token_message(reason: str, login_url: str, flags: list[str], *, tcp: bool) -> str:
    """What to do when tokens are required and none exists: the exact command to run."""
    program = sys.argv[0] if Path(sys.argv[0]).name == "opencrab" else "opencrab"
    tail = "".join(f" {shlex.quote(f)}" for f in flags)
    text = (
        f"refusing to start: {reason} needs bearer tokens and there are none. Create one "
        f"with `{shlex.quote(program)} token create admin{tail}` (it is printed once, only "
        f"its hash is kept), start again and sign in at {login_url} with it"
    )
    if tcp:
        text += (
            f"; or serve on a Unix socket only this user can open, with no token: "
            f"`{shlex.quote(program)} up --socket PATH{tail}`"
        )
    return text


@exits_on_error
def up(
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to bind (config: gateway.rest.host; default 127.0.0.1). "
            "Any other than loopback, or any as root, needs a bearer token.",
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
    socket_path: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Serve on this Unix socket instead of a TCP port. It is created with "
            "mode 0600, so only this user can connect, and needs no token (even as root).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start the OpenCrab server: REST API, web dashboard, gateways and every agent's heartbeat.

    The database is migrated to the newest schema first. Bearer tokens are required off
    loopback and when running as root (it refuses to start until one exists); a Unix
    socket (--socket, mode 0600) needs none.

    Example: opencrab up --port 8080 --data-dir ./data
    """
    import uvicorn

    from opencrab.auth import TokenStore
    from opencrab.server.app import create_app
    from opencrab.server.log_masking import log_config

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
            f"background services and chat gateways only (data: {escape(str(settings.data_dir))})",
            highlight=False,
        )
        asyncio.run(serve_without_http(settings, db, refresh_secs=refresh_secs))
        db.close()
        console.print("stopped", highlight=False)
        return
    if socket_path is not None:
        reason = "gateway.rest.require_token is set" if bind.require_token else None
    else:
        reason = token_required_because(bind.host, bind.require_token, root=os.geteuid() == 0)
    auth = reason is not None
    base = f"http://{url_host(bind.host)}"
    if reason is not None and not TokenStore(db).has_active():
        db.close()
        flags = [
            f
            for flag, value in (("--data-dir", data_dir), ("--config", config))
            if value is not None
            for f in (flag, str(value))
        ]
        login = "the dashboard's /login" if socket_path else f"{base}:{bind.port}/login"
        raise ConfigError(
            no_token_message(reason, login, flags, tcp=socket_path is None),
            key=None if is_loopback(bind.host) else "gateway.rest.host",
        )
    listener: socket.socket | None = None
    if socket_path is None:
        bound = listen(bind.host, bind.port)
        if isinstance(bound, str):
            db.close()
            raise ConfigError(
                f"cannot listen on {_host_port(bind.host, bind.port)}: {bound} "
                "(is another server on that port? choose one with --port)",
                key="gateway.rest.port",
            )
        listener = bound
    app = create_app(
        settings,
        db,
        heartbeat=True,
        tickets=True,
        schedules=True,
        auth=auth,
        gateways=True,
        refresh_secs=refresh_secs,
        freeze_startup=True,
    )
    guarded = StartupErrors(app)  # a ConfigError while starting: its message, exit 2
    if listener is None:
        assert socket_path is not None
        serve_on_socket(guarded, socket_path, settings, log_level=log_level, auth=auth)
        return
    server = uvicorn.Server(
        uvicorn.Config(
            guarded, host=bind.host, port=bind.port, log_level=log_level, log_config=log_config()
        )
    )
    sockets = [listener]
    # short lines, each printed whole (soft_wrap): a URL or path is never cut by a newline
    console.print(
        f"[bold]OpenCrab {__version__}[/] on {base}:{bind.port} "
        f"(bearer token {'required' if auth else 'not required'})",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"Data: {escape(str(settings.data_dir))}", highlight=False, soft_wrap=True)
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
    run_server(server, guarded, sockets)


def run_server(server: Any, guarded: StartupErrors, sockets: list[socket.socket]) -> None:
    """Run uvicorn's `server` on `sockets`; a ConfigError its start-up failed with is
    raised as such (uvicorn would exit with 3 after a traceback)."""
    try:
        server.run(sockets=sockets)
    except SystemExit:
        guarded.raise_config_error()
        raise


def serve_on_socket(
    app: StartupErrors, path: Path, settings: Settings, *, log_level: str, auth: bool
) -> None:
    """Serve `app` on the Unix socket `path` (mode 0600) until SIGINT/SIGTERM; the socket
    file is removed at shutdown."""
    import uvicorn

    from opencrab.server.log_masking import log_config

    class SocketServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            # here, not after run(): uvicorn re-raises SIGTERM once run() ends
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    listener = unix_listener(path)
    server = SocketServer(
        uvicorn.Config(app, uds=str(path), log_level=log_level, log_config=log_config())
    )
    console.print(
        f"[bold]OpenCrab {__version__}[/] on the Unix socket {escape(str(path))} "
        f"(mode 0600: this user only; data: {escape(str(settings.data_dir))}; "
        f"bearer token {'required' if auth else 'not required'})",
        highlight=False,
    )
    console.print(
        f"Try: curl --unix-socket {escape(shlex.quote(str(path)))} http://localhost/api/health",
        highlight=False,
    )
    try:
        run_server(server, app, [listener])
    finally:
        listener.close()


def unix_listener(path: Path) -> socket.socket:
    """A listening Unix socket at `path` created with mode 0600 (umask 0177 while it is
    bound, so no other user can ever open it); a stale socket file is replaced, anything
    else at `path` (a file, a live server's socket) is a ConfigError."""
    if path.is_socket():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
            except OSError:
                path.unlink()  # nobody listens: left by a server that was killed
            else:
                raise ConfigError(f"{path}: a server is already listening on this socket")
    elif path.exists() or path.is_symlink():
        raise ConfigError(f"{path}: exists and is not a socket; choose another --socket path")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{path}: cannot listen here: {exc.strerror or exc}") from None
    finally:
        os.umask(umask)
    os.chmod(path, 0o600)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_host(host: str) -> str:
    """How `host` is written in a URL a user can open (a wildcard bind: localhost)."""
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - recognised, not bound
        return "localhost"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


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
    settings: Settings,
    db: Database,
    *,
    refresh_secs: float = 5.0,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the headless role's background services (opencrab.process: the tool sources,
    heartbeats, tickets, follow-ups of decided approvals, discussions, agent-mode sessions
    and the registered, enabled chat gateways) till `stop` is set (SIGINT/SIGTERM set it)."""
    from opencrab.process import Role, run_until_stopped

    def note(text: str) -> None:
        err_console.print(f"[yellow]note:[/] {escape(text)}", highlight=False)

    await run_until_stopped(
        Role.HEADLESS, settings, db, refresh_secs=refresh_secs, stop=stop, notice=note
    )


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.command("up")(up)
