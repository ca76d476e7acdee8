"""The config models of the built-in gateways: `[gateway.rest]`, `[gateway.discord]`,
`[gateway.cli]`, `[gateway.openai_compat]`, `[gateway.telegram]`, `[gateway.line]`,
`[gateway.slack]`.

Each is declared by its gateway's `config_model` (opencrab.gateway.builtins), exactly as a
plugin's gateway declares its own; the config reads them through the `register_gateways`
hook (opencrab.config.gateways). They live apart from the Discord, Telegram, LINE and
Slack adapters so that the platforms' SDKs (optional extras) are imported only
when their gateway is built.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator

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


_BASE_URL = r"^https?://[A-Za-z0-9.:\[\]-]+$"  # scheme and host (and port), no path


class LineConfig(PlatformConfig):
    """`[gateway.line]`: the Messaging API channel and who may talk to the agent."""

    channel_secret: SecretStr | None = None  # ${LINE_CHANNEL_SECRET}
    channel_access_token: SecretStr | None = None  # ${LINE_CHANNEL_ACCESS_TOKEN}
    # the Messaging API and its content API (images, files); changed only for tests
    api_url: str = Field(default="https://api.line.me", pattern=_BASE_URL)
    data_url: str = Field(default="https://api-data.line.me", pattern=_BASE_URL)
    reply_token_secs: float = Field(default=50.0, gt=0, le=600)  # a reply token's use-by
    request_timeout_secs: float = Field(default=15.0, gt=0, le=300)
    send_attempts: int = Field(default=4, ge=1, le=10)  # tries of a reply/push
    retry_first_secs: float = Field(default=1.0, gt=0)  # backoff of the link and sends
    retry_cap_secs: float = Field(default=60.0, gt=0)


_WEBHOOK_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what setWebhook's secret_token takes


class TelegramConfig(PlatformConfig):
    """`[gateway.telegram]`: the Telegram bot (opencrab.gateway.telegram).

    The allow-lists name users by Telegram user id ("123456") or "@username", chats by
    chat id ("-1001234567890" for a group). `agents` are those `/use` may pick ("*":
    every agent; empty: `/use` is off); a chat in `channel_agents` keeps its agent."""

    token: SecretStr | None = None  # from ${TELEGRAM_BOT_TOKEN}
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None  # the public https URL that reaches /hooks/telegram
    webhook_secret: SecretStr | None = None  # X-Telegram-Bot-Api-Secret-Token
    api_url: str = "https://api.telegram.org"  # a local Bot API server's, say
    poll_timeout: int = Field(default=30, ge=0, le=50)  # getUpdates long-poll, seconds
    agents: list[str] = Field(default_factory=lambda: ["*"])
    files_folder: str = Field(default="telegram", min_length=1, max_length=200)
    max_file_mb: int = Field(default=20, ge=1, le=2000)  # a file in or out, at most

    @field_validator("api_url", "webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/") if value else value

    @field_validator("webhook_secret")
    @classmethod
    def _secret_shape(cls, value: SecretStr | None) -> SecretStr | None:
        text = value.get_secret_value() if value is not None else ""
        if value is not None and not text.startswith("${") and not _WEBHOOK_SECRET.match(text):
            raise ValueError("the webhook secret is 1-256 characters of A-Z a-z 0-9 _ -")
        return value

    @model_validator(mode="after")
    def _webhook_settings(self) -> TelegramConfig:
        if self.enabled and self.mode == "webhook":
            missing = [k for k in ("webhook_url", "webhook_secret") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"mode = 'webhook' needs {' and '.join(missing)}")
        return self


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
