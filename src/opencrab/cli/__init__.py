"""The `opencrab` command line; each command group lives in its own module.

Command modules import only Typer at load time and everything else when a command runs,
so `opencrab --help` stays fast (tests/cli/test_help.py checks what it imports).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from opencrab import __version__

if TYPE_CHECKING:
    import typer


def build_app() -> typer.Typer:
    """The Typer app with every built-in and plugin command registered."""
    import typer

    from opencrab.plugins import command_plugin_manager

    def version_callback(value: bool) -> None:
        if value:
            typer.echo(f"opencrab {__version__}")
            raise typer.Exit()

    app = typer.Typer(
        name="opencrab",
        help="OpenCrab: self-hosted autonomous LLM agents.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        pretty_exceptions_show_locals=False,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(  # typer is local: no Annotated[] for it to evaluate
            False,
            "--version",
            callback=version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ) -> None:
        """OpenCrab: self-hosted autonomous LLM agents."""

    command_plugin_manager().hook.register_commands(app=app)
    return app


def main() -> None:
    """Console-script entry point.

    `opencrab --version` answers before Typer or any command module is imported: it is
    what scripts and health probes call.
    """
    if sys.argv[1:] == ["--version"]:
        sys.stdout.write(f"opencrab {__version__}\n")
        return
    build_app()()
