"""Helpers shared by CLI commands: options, settings, the store, errors → exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from opencrab.errors import ConfigError, OpenCrabError

if TYPE_CHECKING:  # imported when a command runs, not when `--help` is shown
    from opencrab.config import Settings
    from opencrab.core.runtime import Runtime
    from opencrab.store import Database

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file (TOML) layered over the packaged defaults (env: OPENCRAB_CONFIG).",
        show_default=False,
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data directory for the database and workspaces (env: OPENCRAB_HOME; default ./data).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def exits_on_error(func: Callable[P, R]) -> Callable[P, R]:
    """Turn OpenCrab errors into a message on stderr and an exit code.

    ConfigError → 2 (like a usage error); any other OpenCrabError → 1.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            err_console.print(f"[bold red]config error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
        except OpenCrabError as exc:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(1) from None

    return wrapper


def settings_from(
    config: Path | None, data_dir: Path | None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Load settings, with `--data-dir` and other flags as the top layer; a provider
    key may be one stored in the dashboard (checked when the runtime opens)."""
    from opencrab.config import load_settings

    layer: dict[str, Any] = dict(overrides or {})
    if data_dir is not None:
        layer["data_dir"] = str(data_dir)
    return load_settings(config, overrides=layer, stored_keys=True)


def open_store(settings: Settings, *, migrate: bool = True) -> Database:
    """Open the configured database, migrated to the newest schema unless told not to; the
    data directory and the database files are made (or tightened to) owner-only first."""
    from opencrab.store import Database
    from opencrab.store.file_modes import secure_data_dir, sqlite_file
    from opencrab.store.repositories.memory_vectors import use_pgvector_if_installed

    secure_data_dir(Path(settings.data_dir), sqlite_file(settings.database_url))
    db = Database(settings.database_url, busy_timeout_ms=settings.database.busy_timeout_ms)
    if migrate:
        db.upgrade()
        use_pgvector_if_installed(db)
    return db


@contextmanager
def store_from(
    config: Path | None, data_dir: Path | None, *, migrate: bool = True
) -> Iterator[Database]:
    """Settings from the flags, then the store opened (and migrated); closed on exit."""
    db = open_store(settings_from(config, data_dir), migrate=migrate)
    try:
        yield db
    finally:
        db.close()


def print_json(data: Any) -> None:
    """Write JSON to stdout (UTF-8, indented), bypassing Rich markup."""
    import orjson

    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def with_runtime(
    config: Path | None, data_dir: Path | None, body: Callable[[Runtime], Awaitable[T]]
) -> T:
    """Run `body` on the Runtime over the configured database, with the tool sources
    started (its turns have the server's tools); notices go to stderr."""
    import asyncio

    from opencrab.core.runtime import Runtime
    from opencrab.core.tool_sources import start_tool_sources
    from opencrab.mcp.client.stored import StoredMcpServers

    settings = settings_from(config, data_dir)

    async def main() -> T:
        async with Runtime.open(settings) as runtime:
            sources = await start_tool_sources(runtime)
            stored = StoredMcpServers(runtime, sources)  # the dashboard's MCP servers too
            try:
                await stored.sync()
                for notice in runtime.notices:
                    err_console.print(f"[yellow]note:[/] {escape(notice)}", highlight=False)
                return await body(runtime)
            finally:
                await stored.stop()
                await sources.stop()

    return asyncio.run(main())
