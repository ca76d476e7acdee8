"""The built-in gateways, registered through the same hook a plugin uses.

Each adapter module is imported only when its gateway is built, so discord.py (an
optional extra) loads only when `[gateway.discord] enabled = true`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from opencrab.errors import ConfigError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:
    from opencrab.core.runtime import Runtime
    from opencrab.gateway.cli import CliGateway
    from opencrab.gateway.discord import DiscordGateway


def discord(runtime: Runtime, **options: Any) -> DiscordGateway | None:
    """The Discord gateway `[gateway.discord]` configures; None unless it is enabled."""
    config = runtime.settings.gateway.discord
    if not config.enabled:
        return None
    try:
        from opencrab.gateway.discord import DiscordGateway
    except ImportError as exc:
        raise ConfigError(
            f"gateway.discord is enabled but discord.py is not installed ({exc.name or exc}): "
            "pip install 'opencrab[discord]', or set it to false",
            key="gateway.discord.enabled",
        ) from exc
    return DiscordGateway(config, **options)


def cli(
    runtime: Runtime,
    *,
    session_id: str | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> CliGateway | None:
    """A terminal conversation in `session_id` (what `opencrab chat` runs).

    None when `[gateway.cli] enabled = false`, and for a server (no session named): a
    server has no terminal to talk on.
    """
    if session_id is None or not runtime.settings.gateway.cli.enabled:
        return None
    from opencrab.gateway.cli import CliGateway

    return CliGateway(session_id=session_id, stdin=stdin, stdout=stdout)


@hookimpl
def register_gateways(register: Callable[[str, Callable[..., Any]], None]) -> None:
    register("discord", discord)
    register("cli", cli)
