"""The configuration schema: seed 001's `config/default.toml`, validated with pydantic.

Every model forbids unknown keys, so a typo in a file or an `OPENCRAB_…` variable is
reported instead of silently ignored; a `[llm.providers.<name>]` table takes the keys of
its provider's options model besides the common ones (`reference_problems` checks them),
and the open `[gateway]` table holds one table per registered gateway, each checked by
that gateway's own model (opencrab.config.gateways); `[mcp.servers.<name>]` tables are
opencrab.config.mcp's.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticError

from opencrab.config.a2a import A2aSection
from opencrab.config.gateways import gateway_models, unknown_gateway
from opencrab.config.mcp import McpSection
from opencrab.config.origins import KeyPath, origin_of
from opencrab.config.providers import registered_providers
from opencrab.config.telemetry import TelemetrySection
from opencrab.errors import ConfigError
from opencrab.prompts import DEFAULT_LANGUAGE, Language

Port = Annotated[int, Field(ge=1, le=65535)]
_T = TypeVar("_T", bound=BaseModel)
Purpose = Literal["thinking", "conversation", "analysis", "tool_calling", "creative", "embedding"]
PURPOSES: tuple[Purpose, ...] = (
    "thinking",
    "conversation",
    "analysis",
    "tool_calling",
    "creative",
    "embedding",
)


class Section(BaseModel):
    """Base of every config table: unknown keys are errors, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelRef(Section):
    """A model on a provider, as `{ provider = "openai", model = "gpt-5-mini" }`."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)


class AgentSection(Section):
    # the language of prompts and standard skills: en, ja (seed 001's text) or zh;
    # an agent may set its own
    language: Language = DEFAULT_LANGUAGE
    heartbeat_interval_secs: int = Field(default=29, ge=1, le=86_400)  # as a persona's
    workspace_path: str = "{data_dir}/agents/{agent_id}/workspace"
    max_workspace_size_mb: int = Field(default=100, ge=1)
    # tool calls run from one model reply; the rest get an error result the model sees
    max_tool_calls_per_reply: int = Field(default=32, ge=1)
    max_workspace_files: int = Field(default=10_000, ge=1)  # files in one workspace
    # what one recorded event, memory line or message stores; more is cut with a marker
    max_event_bytes: int = Field(default=256 * 1024, ge=1024)
    # a turn's overall deadline (every model call included); past it the turn ends
    # with a turn_timeout error
    turn_timeout_secs: float = Field(default=300.0, gt=0)
    # embed session log lines in the background for memory search by meaning (the
    # memory-index service); false: no process embeds, searches use what is stored
    memory_embedding: bool = True


class LlmModels(Section):
    thinking: ModelRef | None = None
    conversation: ModelRef | None = None
    analysis: ModelRef | None = None
    tool_calling: ModelRef | None = None
    creative: ModelRef | None = None
    embedding: ModelRef | None = None


class SelfSelection(Section):
    enabled: bool = True
    allowed_aliases: list[str] = Field(default_factory=list)


class Fallback(Section):
    # providers (their model of the failed model's tier), aliases or provider/model
    chain: list[str] = Field(default_factory=list)


class ProviderConfig(Section):
    """One `[llm.providers.<name>]` table: the settings every provider has, and its own
    (`options`), which its `ProviderFacts.options` model checks when the config is loaded
    (`reference_problems`) and when the provider is built."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    enabled: bool | None = None
    api_key: SecretStr | None = None
    base_url: str | None = None
    default_model: str | None = None
    timeout_secs: float = Field(default=60.0, gt=0)

    @property
    def options(self) -> dict[str, Any]:
        """The provider's own settings as written (e.g. OpenAI's `organization`)."""
        return dict(self.model_extra or {})


class LlmSection(Section):
    default_provider: str = "openai"
    default_model: str = "gpt-4o"
    models: LlmModels = Field(default_factory=LlmModels)
    self_selection: SelfSelection = Field(default_factory=SelfSelection)
    fallback: Fallback = Field(default_factory=Fallback)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    aliases: dict[str, ModelRef] = Field(default_factory=dict)
    # bytes read from one provider reply (a stream's events counted); more is an error
    max_reply_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)


class GatewaySection(Section):
    """`[gateway.<name>]`: one open table per gateway, each checked by the config model its
    gateway declares (`config_model`, registered through the `register_gateways` hook:
    opencrab.config.gateways); a registered gateway the config leaves out gets its model's
    defaults. `settings.gateway.rest` reads a table; `table(name, Model)` reads it typed."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    @model_validator(mode="after")
    def _tables(self) -> GatewaySection:
        models = gateway_models()
        tables = self.__pydantic_extra__
        assert tables is not None  # extra="allow"
        for name, value in list(tables.items()):
            model = models.get(name)
            if model is None:
                raise ValueError(unknown_gateway(name, models))
            if not isinstance(value, model):
                tables[name] = model.model_validate(value)
        for name, model in models.items():
            if name not in tables:
                tables[name] = model()
        return self

    def table(self, name: str, model: type[_T]) -> _T:
        """The validated `[gateway.<name>]` table, an instance of `model`."""
        value = (self.__pydantic_extra__ or {}).get(name)
        if not isinstance(value, model):
            raise ConfigError(
                f"gateway {name!r} is not registered with the config model {model.__name__}",
                key=f"gateway.{name}",
            )
        return value

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:  # a table by name, as pydantic reads extras
            ...

    @property
    def tables(self) -> dict[str, BaseModel]:
        """Every gateway's validated table, by name."""
        return dict(self.__pydantic_extra__ or {})


class DashboardSection(Section):
    enabled: bool = True
    port: Port = 3000


class DatabaseSection(Section):
    path: str = "{data_dir}/opencrab.db"
    url: str | None = None  # a full SQLAlchemy URL; overrides `path` (e.g. PostgreSQL)
    busy_timeout_ms: int = Field(default=5000, ge=0)
    # how long a process's lease (a turn, an agent's heartbeat) lasts unless renewed:
    # after a crash, another process takes the work over within about this long (at once
    # when the crashed process was on this machine: store/lease_owners.py)
    lease_ttl_secs: float = Field(default=30.0, ge=1.0, le=3600.0)


class ImportsSection(Section):
    # what `opencrab import` takes from one transcript file, counted after decompression:
    # a file over either is reported as a problem and not imported
    max_decompressed_mb: int = Field(default=512, ge=1)
    max_lines: int = Field(default=1_000_000, ge=1)
    # the folders POST /api/imports (and the dashboard) may import from (`~` expanded,
    # symlinks resolved; anything else is refused as if it did not exist); the CLI's
    # `opencrab import` reads what its user names and is not limited by them
    roots: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=lambda: ["~/.codex/sessions", "~/.claude/projects"]
    )


def _network(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IP address or network (e.g. 127.0.0.1/32 or fd00::/8)"
        ) from None


class ToolsSection(Section):
    """Limits of the seed tools (seed 002): commands, HTTP, code search."""

    # execute_command: "auto" runs it in bubblewrap when `bwrap` is on PATH (else unboxed,
    # said in the result), "bwrap" refuses to run without it, "none" never boxes it
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    command_timeout_secs: float = Field(default=60.0, gt=0, le=3600)
    command_max_output_bytes: int = Field(default=64 * 1024, ge=256)
    # what one command may use (each process it starts inherits the limits): processes
    # and threads on top of those its user already runs (RLIMIT_NPROC), address space
    # per process (RLIMIT_AS), CPU seconds per process (RLIMIT_CPU), and the size of its
    # private /tmp in bubblewrap; a file it writes cannot grow past what is left of the
    # workspace quota (RLIMIT_FSIZE), and what it adds over [agent] max_workspace_size_mb
    # or max_workspace_files is removed when it ends
    command_max_processes: int = Field(default=256, ge=1, le=1_000_000)
    command_max_memory_mb: int = Field(default=1024, ge=64)
    command_max_cpu_secs: int = Field(default=60, ge=1, le=86_400)
    command_tmp_size_mb: int = Field(default=64, ge=1)
    # when the server runs as root, commands run as this unprivileged uid and gid
    # (65534, "nobody", by default) with no capabilities; never 0
    command_uid: int = Field(default=65534, ge=1, le=2**32 - 2)
    command_gid: int = Field(default=65534, ge=1, le=2**32 - 2)
    # http_request / fetch_webpage: addresses a private/loopback/link-local/metadata
    # refusal lets through (CIDR networks, e.g. "10.1.2.0/24")
    http_allow_networks: list[Annotated[str, AfterValidator(_network)]] = Field(
        default_factory=list
    )
    http_timeout_secs: float = Field(default=20.0, gt=0, le=600)
    http_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    http_max_redirects: int = Field(default=5, ge=0, le=20)
    # web_search: off until a backend is set; "searxng" queries web_search_url's JSON
    # API through the same guard as http_request
    web_search: Literal["off", "searxng"] = "off"
    web_search_url: str = ""
    web_search_max_results: int = Field(default=10, ge=1, le=50)
    # search_code: a search is a child process killed after search_timeout_secs
    search_timeout_secs: float = Field(default=10.0, gt=0, le=600)
    search_max_matches: int = Field(default=200, ge=1)
    search_max_output_bytes: int = Field(default=64 * 1024, ge=1024)
    search_max_file_bytes: int = Field(default=1024 * 1024, ge=1024)  # larger files skipped


class TicketsSection(Section):
    """The ticket scheduler (seed 002): on or off, how often it looks, and each ticket's
    limits (a ticket's `params` may set its own: maxTurns, maxWallSecs, maxCostUsd)."""

    enabled: bool = True  # run the scheduler in `opencrab up` and `opencrab worker`
    poll_secs: float = Field(default=1.0, gt=0, le=600)  # how often it looks for work
    concurrency: int = Field(default=4, ge=1, le=256)  # tickets one process runs at once
    # a stretch of running (from a start or resume until it stops) suspends with its reason
    # once it used this many turns, seconds or dollars; None: no cost limit of its own
    max_turns: int = Field(default=30, ge=1)
    max_wall_secs: float = Field(default=1800.0, gt=0)
    max_cost_usd: float | None = Field(default=None, ge=0)


class SchedulesSection(Section):
    """Schedules (issue 37): whether this process runs them, how many an agent may have,
    the shortest interval, and how stale a due slot may be and still count as on time."""

    enabled: bool = True  # run the schedules in `opencrab up` and `opencrab worker`
    max_per_agent: int = Field(default=50, ge=1, le=100_000)  # schedules an agent may have
    min_interval_secs: int = Field(default=60, ge=1, le=86_400)  # everySecs and cron gaps
    # how often the schedule list is checked for changes made by other processes (one
    # indexed read; changes made in this process are followed at once)
    refresh_secs: float = Field(default=1.0, gt=0, le=60)
    # a slot found due later than this after its time (the process was down, or busy)
    # follows the schedule's catchUp policy: run once now, or skip
    late_grace_secs: float = Field(default=10.0, ge=0, le=3600)


class LearningSection(Section):
    """Seed 001's learning loop at the end of a session (core/consolidation.py): a session
    idle for `session_idle_minutes`, or ended (API, CLI, dashboard), is summarised into
    curated memories and impressions by the agent's analysis model."""

    session_end: bool = True  # consolidate ended sessions in `opencrab up` and `worker`
    session_idle_minutes: float = Field(default=30.0, gt=0, le=7 * 24 * 60)
    check_secs: float = Field(default=60.0, gt=0, le=3600)  # how often it looks
    # sessions whose latest line is older are left alone (imported history, an old store)
    max_age_hours: float = Field(default=72.0, gt=0)
    max_lines: int = Field(default=80, ge=1, le=1000)  # the latest lines one summary reads


class AlertOutlet(Section):
    """A channel of a gateway (opencrab.messages.Outlet): where budget alerts are written."""

    gateway: str = Field(min_length=1, max_length=100)
    channel: str = Field(min_length=1, max_length=500)


class SpendAlarms(Section):
    """Slow-burn alarms (core/spend_alarms.py): spend that no cap stops but a person
    should hear of. Keys of the two tables are agent names or ids, and "fleet"."""

    enabled: bool = True
    baseline_days: int = Field(default=14, ge=3, le=90)  # the trailing window (before today)
    baseline_factor: float = Field(default=2.0, gt=1, le=100)  # today > factor x median
    min_usd: float = Field(default=0.5, ge=0)  # today's spend below this never alarms
    # today's spend above a scope's expected daily spend alarms
    expected_daily_usd: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    # the month's forecast above this alarms (default: the scope's monthly cap, if any)
    forecast_month_usd: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    # an agent spending on its own (heartbeats, tickets, schedules) with no call a person
    # started (chat, discussion, CLI) today and on the days before
    unattended_quiet_days: int = Field(default=1, ge=0, le=30)


class BudgetsSection(Section):
    """Fleet-wide LLM spend caps (UTC day and calendar month; None: no cap) and where
    budget alerts (80 % and 100 % of any cap) are also delivered. Caps set through
    `PUT /api/budgets` are stored and take the place of these."""

    fleet_daily_usd: float | None = Field(default=None, ge=0)
    fleet_monthly_usd: float | None = Field(default=None, ge=0)
    webhook_url: str | None = Field(default=None, pattern=r"^https?://")  # POST JSON alerts
    webhook_timeout_secs: float = Field(default=5.0, gt=0, le=60)
    # the outlet alerts are also written to, a channel of a gateway running in this
    # process: { gateway = "<name>", channel = "<its channel id>" }
    alert_outlet: AlertOutlet | None = None
    # the same as alert_outlet = { gateway = "discord", channel = "<id>" } (older configs)
    discord_channel_id: int | None = Field(default=None, ge=1)
    # reservations (core/reservations.py): the output tokens a call without max_tokens is
    # assumed to produce, and how long a reservation lives when its process dies (None:
    # [agent] turn_timeout_secs + 120 s)
    reserve_output_tokens: int = Field(default=1024, ge=1, le=1_000_000)
    reservation_ttl_secs: float | None = Field(default=None, gt=0, le=86_400)
    alarms: SpendAlarms = Field(default_factory=SpendAlarms)

    @model_validator(mode="before")
    @classmethod
    def _older_outlet(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("alert_outlet") is None:
            channel = data.get("discord_channel_id")
            if isinstance(channel, int) and not isinstance(channel, bool) and channel >= 1:
                data = {**data, "alert_outlet": {"gateway": "discord", "channel": str(channel)}}
        return data


class InboxSection(Section):
    """Where a person hears of new inbox items (opencrab/inbox/notifier.py): a webhook
    with a signed body and the gateway channel `[budgets] alert_outlet` names, in one
    message per batch."""

    notify: bool = True  # off: nothing is sent (the inbox still lists everything)
    webhook_url: str | None = Field(default=None, pattern=r"^https?://")
    # the environment variable holding the signing secret; without one the webhook is
    # not sent (the failure is recorded and shown)
    webhook_secret_env: str = Field(
        default="OPENCRAB_INBOX_WEBHOOK_SECRET", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"
    )
    webhook_timeout_secs: float = Field(default=5.0, gt=0, le=60)
    batch_secs: float = Field(default=10.0, ge=0.2, le=3600)  # one message per this window
    # the dashboard's address, for the link in a message (default: the server's own)
    public_url: str | None = Field(default=None, pattern=r"^https?://")

    @field_validator("webhook_secret_env")
    @classmethod
    def _not_a_setting(cls, name: str) -> str:
        if name.startswith("OPENCRAB_") and name != "OPENCRAB_INBOX_WEBHOOK_SECRET":
            raise ValueError(
                "a variable starting with OPENCRAB_ is read as a setting; name another one "
                "(the default OPENCRAB_INBOX_WEBHOOK_SECRET is kept out of the settings)"
            )
        return name


class AgentModeSection(Section):
    """Agent mode (seed 004): where session files live, the master agent, run limits."""

    # one JSON file per session, `{sessions_dir}/{session_id}.json` (`~` is expanded)
    sessions_dir: str = Field(default="~/.gwt/sessions", min_length=1)
    # the agent that plans (its persona and models); created on first use when missing
    master_agent: str = Field(default="master", min_length=1, max_length=100)
    # an invalid plan is shown to the model again this many times, then one task is used
    plan_retries: int = Field(default=2, ge=0, le=10)
    max_tasks: int = Field(default=50, ge=1, le=1000)  # tasks one plan may have
    parallelism: int = Field(default=3, ge=1, le=64)  # tasks of a session run at once
    # the tmux server of the sub-agents' panes (`tmux -L`); empty: one per data directory,
    # `opencrab-<hash of its path>`, so two instances never share panes
    tmux_socket: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    # a sub-agent whose CLI sends no signal (no hooks, no notify) completes by IdleTimeout
    # once its screen has not changed for this long and shows no question; 0: never
    idle_timeout_secs: float = Field(default=600.0, ge=0, le=86_400)

    @property
    def sessions_path(self) -> Path:
        """`sessions_dir` with `~` expanded."""
        return Path(self.sessions_dir).expanduser()


class Settings(Section):
    """The whole, validated configuration."""

    data_dir: Path = Path("data")
    agent: AgentSection = Field(default_factory=AgentSection)
    llm: LlmSection = Field(default_factory=LlmSection)
    gateway: GatewaySection = Field(default_factory=GatewaySection)
    dashboard: DashboardSection = Field(default_factory=DashboardSection)
    database: DatabaseSection = Field(default_factory=DatabaseSection)
    imports: ImportsSection = Field(default_factory=ImportsSection)
    tools: ToolsSection = Field(default_factory=ToolsSection)
    tickets: TicketsSection = Field(default_factory=TicketsSection)
    schedules: SchedulesSection = Field(default_factory=SchedulesSection)
    learning: LearningSection = Field(default_factory=LearningSection)
    budgets: BudgetsSection = Field(default_factory=BudgetsSection)
    inbox: InboxSection = Field(default_factory=InboxSection)
    agent_mode: AgentModeSection = Field(default_factory=AgentModeSection)
    mcp: McpSection = Field(default_factory=McpSection)
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection)
    a2a: A2aSection = Field(default_factory=A2aSection)
    _origins: dict[KeyPath, str] = PrivateAttr(default_factory=dict)
    _memo: dict[Any, Any] = PrivateAttr(default_factory=dict)
    _keys_needed: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def keys_needed(self) -> dict[str, str]:
        """Providers the user's settings use whose API key variable is unset, each with
        where to set one, unless the dashboard stored a key (set by the loader with
        `stored_keys`; shown by opencrab.llm.live_settings, told by the router's calls)."""
        return self._keys_needed

    @property
    def memo(self) -> dict[Any, Any]:
        """Answers derived from these settings, each keyed by the values it read
        (provenance.purpose_model); never part of the configuration."""
        return self._memo

    @property
    def origins(self) -> dict[KeyPath, str]:
        """Each merged leaf's layer label (set by the loader; empty for settings made in code)."""
        return self._origins

    def origin(self, path: KeyPath) -> str:
        """The label of the layer that gave `path` its value (see opencrab.config.provenance)."""
        return origin_of(self._origins, path)

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL of the store: `database.url`, else SQLite at `database.path`."""
        if self.database.url:
            return self.database.url
        return f"sqlite:///{Path(self.database.path).expanduser()}"


def reference_problems(settings: Settings) -> list[tuple[tuple[str | int, ...], str]]:
    """Cross-references pydantic cannot check: provider names (the registered providers,
    plugins' included), each provider's own settings (its options model) and the alias
    whitelist.

    Returns (key path, problem) pairs; empty when everything refers to something real.
    """
    llm = settings.llm
    problems: list[tuple[tuple[str | int, ...], str]] = []
    registered = registered_providers()

    def known(name: str, path: tuple[str | int, ...]) -> bool:
        if name not in registered:
            problems.append(
                (path, f"unknown provider {name!r} (registered: {', '.join(registered)})")
            )
            return False
        return True

    for name, config in llm.providers.items():
        if known(name, ("llm", "providers", name)):
            problems += option_problems(
                registered[name].facts.options, config, ("llm", "providers", name)
            )
    known(llm.default_provider, ("llm", "default_provider"))
    for purpose in PURPOSES:
        ref = getattr(llm.models, purpose)
        if ref is not None:
            known(ref.provider, ("llm", "models", purpose, "provider"))
    for alias, ref in llm.aliases.items():
        known(ref.provider, ("llm", "aliases", alias, "provider"))
    for i, entry in enumerate(llm.fallback.chain):
        if entry not in llm.aliases:  # a provider, or provider/model
            known(entry.split("/", 1)[0], ("llm", "fallback", "chain", i))
    for i, alias in enumerate(llm.self_selection.allowed_aliases):
        if alias not in llm.aliases:
            problems.append(
                (
                    ("llm", "self_selection", "allowed_aliases", i),
                    f"alias {alias!r} is not defined in [llm.aliases]",
                )
            )
    return problems


def option_problems(
    model: type[BaseModel], config: ProviderConfig, path: tuple[str | int, ...]
) -> list[tuple[tuple[str | int, ...], str]]:
    """What `model` (a provider's options model) finds wrong with the provider's own
    settings in `config`, each at its key path."""
    try:
        model.model_validate(config.options)
    except PydanticError as exc:
        return [
            ((*path, *err["loc"]), _option_message(err["type"], err["msg"])) for err in exc.errors()
        ]
    return []


def _option_message(kind: str, message: str) -> str:
    if kind == "extra_forbidden":
        return "unknown key for this provider (a typo, or a setting of another provider?)"
    return message
