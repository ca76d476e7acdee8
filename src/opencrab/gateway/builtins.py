"""The built-in gateways, registered through the same hook a plugin uses.

Each declares the model of its `[gateway.<name>]` table (opencrab.gateway.configs) and
builds itself from the checked table (`from_config`). Each adapter module is imported
only when its gateway is built, so each platform's SDK (discord.py, python-telegram-bot,
line-bot-sdk, slack-sdk: optional extras) loads only when its table says `enabled = true`.
`rest` and `openai_compat` are served by the HTTP server (`opencrab up`): they have
tables to check but no gateway loop to run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

from opencrab.errors import ConfigError
from opencrab.gateway.configs import (
    CliConfig,
    DiscordConfig,
    LineConfig,
    OpenAiCompatConfig,
    RestConfig,
    SlackConfig,
    TelegramConfig,
)
from opencrab.plugins import hookimpl

if TYPE_CHECKING:
    from opencrab.gateway.base import GatewayConfig
    from opencrab.gateway.cli import CliGateway
    from opencrab.gateway.discord import DiscordGateway
    from opencrab.gateway.line import LineGateway
    from opencrab.gateway.slack import SlackGateway
    from opencrab.gateway.telegram import TelegramGateway


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


class Line:
    """`[gateway.line]`: the LINE Messaging API bot (opencrab.gateway.line)."""

    name: ClassVar[str] = "line"
    config_model: ClassVar[type[GatewayConfig]] = LineConfig

    @staticmethod
    def from_config(runtime: Any, config: LineConfig, **options: Any) -> LineGateway | None:
        """The LINE gateway the table configures; None unless it is enabled. LINE's
        webhook comes in over HTTP, so it needs the server's HTTP side."""
        if not config.enabled:
            return None
        if not runtime.settings.gateway.rest.enabled:
            raise ConfigError(
                "gateway.line is enabled but LINE's webhook arrives over HTTP and "
                "[gateway.rest] enabled = false: turn the REST gateway on, or this one off",
                key="gateway.line.enabled",
            )
        try:
            import linebot.v3.messaging  # noqa: F401  (the SDK the gateway runs on)

            from opencrab.gateway.line import LineGateway
        except ImportError as exc:
            raise ConfigError(
                f"gateway.line is enabled but line-bot-sdk is not installed ({exc.name or exc}): "
                "pip install 'opencrab[line]', or set it to false",
                key="gateway.line.enabled",
            ) from exc
        return LineGateway(config, runtime=runtime)


class Telegram:
    """`[gateway.telegram]`: the Telegram bot (opencrab.gateway.telegram)."""

    name: ClassVar[str] = "telegram"
    config_model: ClassVar[type[GatewayConfig]] = TelegramConfig

    @staticmethod
    def from_config(runtime: Any, config: TelegramConfig, **options: Any) -> TelegramGateway | None:
        """The Telegram gateway the table configures; None unless it is enabled."""
        if not config.enabled:
            return None
        try:
            from opencrab.gateway.telegram import TelegramGateway
        except ImportError as exc:
            raise ConfigError(
                "gateway.telegram is enabled but python-telegram-bot is not installed "
                f"({exc.name or exc}): pip install 'opencrab[telegram]', or set it to false",
                key="gateway.telegram.enabled",
            ) from exc
        return TelegramGateway(config, runtime, **options)


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
    register(Line)
    register(Telegram)
    register(Slack)
    register(Cli)
    register(OpenAiCompat)
