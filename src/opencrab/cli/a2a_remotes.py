"""`opencrab a2a-remotes check|encrypt-token`: the remote A2A agents of `[a2a.remotes]`.

`check` reads each remote's Agent Card as a running process would (the same client, SSRF
guard and token) and prints its agent, skills and tool, or why it cannot be read.
`encrypt-token` reads a remote's bearer token from stdin and prints it encrypted with the
key of the data directory (the key of the dashboard's API keys), for the table's
`token_encrypted`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    JsonOption,
    console,
    exits_on_error,
    print_json,
    settings_from,
)
from opencrab.plugins import hookimpl

remotes_app = typer.Typer(help="Remote A2A agents used as tools.", no_args_is_help=True)


@remotes_app.command()
@exits_on_error
def check(
    name: Annotated[str | None, typer.Argument(help="One remote (all when left out).")] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read each remote's card and show its agent and skills, or why it cannot be read.

    Example: opencrab a2a-remotes check research
    """
    from opencrab.a2a.client_source import A2aRemoteSource
    from opencrab.errors import ConfigError

    settings = settings_from(config, data_dir)
    remotes = settings.a2a.remotes
    if name is not None and name not in remotes:
        known = ", ".join(sorted(remotes)) or "none"
        raise ConfigError(f"no [a2a.remotes.{name}] table (the remotes: {known})")
    names = [name] if name is not None else sorted(remotes)

    async def read_all() -> list[dict[str, Any]]:
        found = []
        for remote in names:
            source = A2aRemoteSource(remote, remotes[remote], settings)
            try:
                await source.start()
            except Exception as exc:
                source.last_error = source.last_error or f"{type(exc).__name__}: {exc}"
            status = source.status()
            if source.card is not None:
                status["skills"] = [s.name or s.id for s in source.card.skills]
            await source.stop()
            found.append(status | {"state": "failed" if source.card is None else "running"})
        return found

    found = asyncio.run(read_all())
    if as_json:
        print_json(found)
    else:
        for status in found:
            line = f"{status['remote']} ({status['url']}): "
            if status["state"] == "running":
                line += f"{status['agent']}; skills: {', '.join(status['skills']) or 'none'}; "
                line += f"tool {', '.join(status['tools'])}"
            else:
                line += f"cannot be read: {status['last_error']}"
            console.print(escape(line), highlight=False)
    if any(s["state"] != "running" for s in found):
        raise typer.Exit(1)


@remotes_app.command("encrypt-token")
@exits_on_error
def encrypt_token(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Read a bearer token from stdin; print it encrypted for `token_encrypted`.

    Example: printf %s "$TOKEN" | opencrab a2a-remotes encrypt-token
    """
    from pathlib import Path

    from opencrab.config.secret_key import SecretBox
    from opencrab.errors import ValidationError

    settings = settings_from(config, data_dir)
    typed = sys.stdin.isatty()
    token = (typer.prompt("token", hide_input=True) if typed else sys.stdin.read()).strip()
    if not token or any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise ValidationError("give the token on stdin: one line, no control characters")
    box = SecretBox.load(Path(settings.data_dir), create=True)
    console.print(f'token_encrypted = "{box.encrypt(token)}"', highlight=False, soft_wrap=True)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(remotes_app, name="a2a-remotes")
