"""The config models of the built-in gateways: `[gateway.rest]`, `[gateway.discord]`,
`[gateway.cli]`, `[gateway.openai_compat]`, `[gateway.slack]`.

Each is declared by its gateway's `config_model` (opencrab.gateway.builtins), exactly as a
plugin's gateway declares its own; the config reads them through the `register_gateways`
hook (opencrab.config.gateways). They live apart from the Discord adapter so that
discord.py (an optional extra) is imported only when that gateway is built.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr

from opencrab.config.hosts import host_name
from opencrab.gateway.base import GatewayConfig
from opencrab.gateway.platform import PlatformConfig

Port = Annotated[int, Field(ge=1, le=65535)]


def _allowed_host(text: str) -> str:
    name = host_name(text)
    if name is None:
        raise ValueError(
            f"{text!r} is not a host name: give a name or IP address without scheme, "
            "port or path, e.g. crab.example"
        )
    return name


AllowedHost = Annotated[str, AfterValidator(_allowed_host)]


class RestConfig(GatewayConfig):
    """`[gateway.rest]`: the HTTP API (and dashboard) `opencrab up` serves."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Port = 8080
    require_token: bool = False  # always required off loopback and as root (cli/up.py)
    cors_origins: list[str] = Field(default_factory=list)  # CORS is off when empty
    # names the server answers to besides localhost, its loopback and bind addresses
    allowed_hosts: list[AllowedHost] = Field(default_factory=list)
    # chat turns one WebSocket connection may run at once; more are refused
    ws_max_turns_per_connection: int = Field(default=4, ge=1)
    # WebSockets one client (token, else address) keeps open at once (server/limits.py)
    ws_max_per_client: int = Field(default=16, ge=1)
    # a request body over this (KiB) is refused (413) before it is read; an upload to a
    # workspace has its quota as its limit instead
    max_body_kb: int = Field(default=1024, ge=1)


class DiscordConfig(GatewayConfig):
    """`[gateway.discord]`: the bot, where it answers and who answers."""

    enabled: bool = False
    token: SecretStr | None = None
    guild_ids: list[int] = Field(default_factory=list)  # the allow-list; empty allows none
    channel_ids: list[int] = Field(default_factory=list)  # empty: every channel of the guilds
    agent: str | None = None  # who answers (name or id); the only agent when left out
    mention_only: bool = False  # answer only messages that mention the bot


class CliConfig(GatewayConfig):
    """`[gateway.cli]`: `opencrab chat` in a terminal."""

    enabled: bool = True


class OpenAiCompatConfig(GatewayConfig):
    """`[gateway.openai_compat]`: the OpenAI-compatible `/v1` routes of the server."""

    enabled: bool = False


class SlackConfig(PlatformConfig):
    """`[gateway.slack]`: the Slack app's tokens, how Slack reaches it, who is answered."""

    mode: Literal["socket", "events"] = "socket"
    bot_token: SecretStr | None = None  # xoxb-…: every Web API call, file downloads
    app_token: SecretStr | None = None  # xapp-… with connections:write: Socket Mode
    signing_secret: SecretStr | None = None  # the Events API's request signatures
    slash_command: str = Field(default="/crab", pattern=r"^/[\w-]{1,31}$")
    api_url: str = Field(default="https://slack.com/api/", pattern=r"^https?://")
    file_max_mb: int = Field(default=20, ge=1, le=1024)  # a larger file is not fetched
    ping_interval_secs: float = Field(default=10.0, gt=0, le=300)
    connect_timeout_secs: float = Field(default=30.0, gt=0, le=600)
    retry_first_secs: float = Field(default=1.0, gt=0, le=600)
    retry_cap_secs: float = Field(default=60.0, gt=0, le=3600)
