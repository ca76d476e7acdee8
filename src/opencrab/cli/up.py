"""`opencrab up`: run the server (REST API and the agents' heartbeats) in one process."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

import typer

from opencrab import __version__
from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    console,
    exits_on_error,
    open_store,
    settings_from,
)
from opencrab.errors import ConfigError
from opencrab.plugins import hookimpl


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@exits_on_error
def up(
    host: Annotated[
        str | None, typer.Option(help="Address to bind [config: gateway.rest.host].")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to listen on [config: gateway.rest.port].")
    ] = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    log_level: Annotated[str, typer.Option(help="Server log level.")] = "info",
) -> None:
    """Start the OpenCrab server: REST API and every agent's heartbeat (migrates first)."""
    import uvicorn

    from opencrab.server.app import create_app

    rest: dict[str, Any] = {}
    if host is not None:
        rest["host"] = host
    if port is not None:
        rest["port"] = port
    settings = settings_from(config, data_dir, {"gateway": {"rest": rest}} if rest else None)
    bind = settings.gateway.rest
    if not is_loopback(bind.host):
        raise ConfigError(
            f"refusing to bind {bind.host}: this server has no authentication yet, so it "
            "only listens on loopback addresses (127.0.0.1, ::1, localhost)",
            key="gateway.rest.host",
        )
    db = open_store(settings)
    app = create_app(settings, db, heartbeat=True)
    console.print(
        f"[bold]OpenCrab {__version__}[/] on http://{bind.host}:{bind.port} "
        f"(data: {settings.data_dir})",
        highlight=False,
    )
    uvicorn.run(app, host=bind.host, port=bind.port, log_level=log_level)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.command("up")(up)
