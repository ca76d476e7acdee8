"""The built-in gateways, registered through the same hook a plugin uses.

Each declares the model of its `[gateway.<name>]` table (opencrab.gateway.configs) and
builds itself from the checked table (`from_config`). Each adapter module is imported
only when its gateway is built, so discord.py (an optional extra) loads only when
`[gateway.discord] enabled = true`, slack_sdk only when `[gateway.slack]` is. `rest` and
`openai_compat` are served by the HTTP server (`opencrab up`): they have tables to check
but no gateway loop to run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

from opencrab.errors import ConfigError
from opencrab.gateway.configs import (
    CliConfig,
    DiscordConfig,
    OpenAiCompatConfig,
    RestConfig,
    SlackConfig,
)
from opencrab.plugins import hookimpl

if TYPE_CHECKING:
    from opencrab.gateway.base import GatewayConfig
    from opencrab.gateway.cli import CliGateway
    from opencrab.gateway.discord import DiscordGateway
    from opencrab.gateway.slack import SlackGateway


class Discord:
    """`[gateway.discord]`: the Discord bot (opencrab.gateway.discord)."""

    name: ClassVar[str] = "discord"
    config_model: ClassVar[type[GatewayConfig]] = DiscordConfig

    @staticmethod
    def from_config(runtime: Any, config: DiscordConfig, **options: Any) -> DiscordGateway | None:
        """The Discord gateway the table configures; None unless it is enabled."""
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


class Slack:
    """`[gateway.slack]`: the Slack app (opencrab.gateway.slack), Socket Mode or Events API."""

    name: ClassVar[str] = "slack"
    config_model: ClassVar[type[GatewayConfig]] = SlackConfig

    @staticmethod
    def from_config(runtime: Any, config: SlackConfig, **options: Any) -> SlackGateway | None:
        """The Slack gateway the table configures; None unless it is enabled."""
        if not config.enabled:
            return None
        try:
            import slack_sdk.socket_mode.aiohttp  # noqa: F401  (the extra is installed)
        except ImportError as exc:
            raise ConfigError(
                f"gateway.slack is enabled but slack_sdk is not installed ({exc.name or exc}): "
                "pip install 'opencrab[slack]', or set it to false",
                key="gateway.slack.enabled",
            ) from exc
        from opencrab.gateway.slack import SlackGateway

        return SlackGateway(config, runtime, **options)


class Cli:
    """`[gateway.cli]`: a conversation in a terminal (what `opencrab chat` runs)."""

    name: ClassVar[str] = "cli"
    config_model: ClassVar[type[GatewayConfig]] = CliConfig

    @staticmethod
    def from_config(
        runtime: Any,
        config: CliConfig,
        *,
        session_id: str | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
    ) -> CliGateway | None:
        """A terminal conversation in `session_id`.

        None when `[gateway.cli] enabled = false`, and for a server (no session named): a
        server has no terminal to talk on.
        """
        if session_id is None or not config.enabled:
            return None
        from opencrab.gateway.cli import CliGateway

        return CliGateway(session_id=session_id, stdin=stdin, stdout=stdout, config=config)


class _Served:
    """A gateway the HTTP server serves itself: a table to check, no loop to run."""

    name: ClassVar[str]
    config_model: ClassVar[type[GatewayConfig]]

    @staticmethod
    def from_config(runtime: Any, config: Any, **options: Any) -> None:
        """Nothing to run beside the server."""
        return


class Rest(_Served):
    """`[gateway.rest]`: the REST API, WebSocket and dashboard (opencrab.server)."""

    name: ClassVar[str] = "rest"
    config_model: ClassVar[type[GatewayConfig]] = RestConfig


class OpenAiCompat(_Served):
    """`[gateway.openai_compat]`: the OpenAI-compatible `/v1` routes."""

    name: ClassVar[str] = "openai_compat"
    config_model: ClassVar[type[GatewayConfig]] = OpenAiCompatConfig


@hookimpl
def register_gateways(register: Callable[[Any], None]) -> None:
    register(Rest)
    register(Discord)
    register(Slack)
    register(Cli)
    register(OpenAiCompat)
