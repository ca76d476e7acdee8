"""The `opencrab` command line; each command group lives in its own module."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from opencrab import __version__
from opencrab.plugins import plugin_manager


def _version(value: bool) -> None:
    if value:
        typer.echo(f"opencrab {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    """The Typer app with every built-in and plugin command registered."""
    app = typer.Typer(
        name="opencrab",
        help="OpenCrab: self-hosted autonomous LLM agents.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        pretty_exceptions_show_locals=False,
    )

    @app.callback()
    def _root(
        version: Annotated[
            bool,
            typer.Option(
                "--version", callback=_version, is_eager=True, help="Print the version and exit."
            ),
        ] = False,
    ) -> None:
        """OpenCrab: self-hosted autonomous LLM agents."""

    plugin_manager().hook.register_commands(app=app)
    return app


def main() -> None:
    """Console-script entry point.

    `opencrab --version` answers before any command module (and with them SQLAlchemy,
    FastAPI, the SDKs) is imported: it is what scripts and health probes call.
    """
    if sys.argv[1:] == ["--version"]:
        sys.stdout.write(f"opencrab {__version__}\n")
        return
    build_app()()
