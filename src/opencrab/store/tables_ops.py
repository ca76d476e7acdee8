"""The operator's tables: API tokens and dashboard sign-ins, budgets, LLM settings made
on the dashboard and the daily usage sums, MCP servers, schedules and the inbox.
Import them from opencrab.store.tables (store/table_base.py says why they are apart).
"""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.store.table_base import _agent_fk, _created, _in, _updated, metadata
from opencrab.store.types import UtcDateTime, Uuid

__all__ = [
    "SCHEDULE_CATCH_UPS",
    "SCHEDULE_KINDS",
    "SCHEDULE_RUN_STATUSES",
    "SCHEDULE_RUN_TRIGGERS",
    "TOKEN_SCOPES",
    "a2a_tasks",
    "api_tokens",
    "budget_alerts",
    "budget_caps",
    "budget_reservations",
    "chat_agents",
    "gateway_settings",
    "inbox_items",
    "inbox_secrets",
    "llm_alias_settings",
    "llm_chain_settings",
    "llm_provider_settings",
    "llm_settings_audit",
    "llm_usage_agent_daily",
    "llm_usage_daily",
    "llm_usage_fleet_daily",
    "llm_usage_speed",
    "login_sessions",
    "mcp_servers",
    "schedule_runs",
    "schedules",
]

# ------------------------------------------------------------- server: API bearer tokens
TOKEN_SCOPES = ("read", "chat", "operate", "admin")  # each includes the ones before it

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),  # SHA-256, hex
    sa.Column("prefix", sa.String(16), nullable=False),  # shown in lists to tell tokens apart
    _created(),
    sa.Column("last_used_at", UtcDateTime),
    sa.Column("revoked_at", UtcDateTime),
    sa.Column("scope", sa.String(16), nullable=False, server_default="admin"),
    sa.CheckConstraint(_in("scope", TOKEN_SCOPES), name="scope"),
)

login_sessions = sa.Table(  # the dashboard's sign-ins: the cookie holds the secret
    "login_sessions",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column(
        "token_id",
        Uuid,
        sa.ForeignKey("api_tokens.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("session_hash", sa.String(64), nullable=False, unique=True),  # SHA-256, hex
    _created(),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("ended_at", UtcDateTime),  # signed out, or its token revoked
)

# revision 0020 (issue 21 §3): fleet-wide caps set at runtime, and budget alerts
budget_caps = sa.Table(
    "budget_caps",
    metadata,
    sa.Column("scope", sa.String(16), primary_key=True),  # "fleet"
    sa.Column("daily_usd", sa.Float),
    sa.Column("monthly_usd", sa.Float),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

budget_alerts = sa.Table(
    "budget_alerts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("scope", sa.String(64), nullable=False),  # "fleet" or an agent id
    sa.Column("cap", sa.String(16), nullable=False),  # daily | monthly
    sa.Column("period", sa.String(16), nullable=False),  # 2026-11-24 | 2026-11
    sa.Column("threshold", sa.Integer, nullable=False),  # 80 | 100 (percent)
    sa.Column("cap_usd", sa.Float, nullable=False),
    sa.Column("spent_usd", sa.Float, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False, index=True),
    sa.UniqueConstraint("scope", "cap", "period", "threshold"),
)

budget_reservations = sa.Table(
    "budget_reservations",
    metadata,
    # the call attempt's llm_usage_metrics id: the row that settles it replaces it
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),  # the process (leases.PROCESS_OWNER)
    sa.Column("agent_id", sa.String(64), nullable=False, index=True),  # or "system"
    sa.Column("ticket_id", sa.String(64), index=True),  # a ticket's maxCostUsd, if any
    sa.Column("cost_usd", sa.Float, nullable=False),  # the call's estimated cost
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False, index=True),  # lapses then
)

# ------------------------------------------- LLM settings from the dashboard (issue 21)
llm_provider_settings = sa.Table(
    "llm_provider_settings",
    metadata,
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("enabled", sa.Boolean),  # None: as configured
    sa.Column("api_key_encrypted", sa.Text),  # a Fernet token; never the key in clear
    sa.Column("api_key_last4", sa.String(4)),
    sa.Column("base_url", sa.String(2000)),
    _updated(),
    # revision 0026: scheme://host[:port] the key was entered for; it is sent only there
    sa.Column("api_key_origin", sa.String(300)),
)

llm_alias_settings = sa.Table(
    "llm_alias_settings",
    metadata,
    sa.Column("alias", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(64)),  # None with removed
    sa.Column("model", sa.String(200)),
    sa.Column("removed", sa.Boolean, nullable=False, server_default=sa.false()),
    _updated(),
)

llm_chain_settings = sa.Table(
    "llm_chain_settings",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),  # always 1
    sa.Column("chain_json", sa.JSON, nullable=False),
    _updated(),
)

llm_settings_audit = sa.Table(
    "llm_settings_audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", UtcDateTime, nullable=False, index=True),
    sa.Column("actor", sa.String(200), nullable=False),  # a token's name, or "local"
    sa.Column("target", sa.String(200), nullable=False),  # e.g. providers.openai.api_key
    sa.Column("action", sa.String(16), nullable=False),  # set, clear, remove
    sa.Column("detail", sa.Text, nullable=False),  # never a secret: a key shows as …last4
)

# revision 0025: llm_usage_metrics summed per UTC day and key, written with every insert
llm_usage_daily = sa.Table(
    "llm_usage_daily",
    metadata,
    # written by store/repositories/metrics.py in the transaction of each insert into
    # (and re-pricing or rating of) llm_usage_metrics; a key's sums equal SQL over its rows
    sa.Column("day", sa.String(10), primary_key=True),  # YYYY-MM-DD of the call (UTC)
    sa.Column("agent_id", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(200), primary_key=True),
    sa.Column("purpose", sa.String(32), primary_key=True),
    sa.Column("task_type", sa.String(64), primary_key=True),  # "" for a call without one
    sa.Column("status", sa.String(16), primary_key=True),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("input_tokens", sa.BigInteger, nullable=False),
    sa.Column("output_tokens", sa.BigInteger, nullable=False),
    sa.Column("total_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False),
    sa.Column("reasoning_tokens", sa.BigInteger, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("quality_sum", sa.Float, nullable=False),
    sa.Column("quality_count", sa.BigInteger, nullable=False),
    sa.Column("latency_ms_sum", sa.BigInteger, nullable=False),
    sa.Column("ttft_ms_sum", sa.BigInteger, nullable=False),
    sa.Column("ttft_count", sa.BigInteger, nullable=False),
    # revision 0046: the calls rated a failed task (task_success false): the model
    # suggestions' success rate (opencrab.llm.analysis) from the rollup
    sa.Column("failed_tasks", sa.BigInteger, nullable=False, server_default="0"),
    sqlite_with_rowid=False,  # stored in key order: a period's rows are read in one run
)
sa.Index(None, llm_usage_daily.c.agent_id, llm_usage_daily.c.day)

# revision 0041: llm_usage_daily without the agent: the fleet's figures read a row per key
llm_usage_fleet_daily = sa.Table(
    "llm_usage_fleet_daily",
    metadata,
    # written with llm_usage_daily (store/repositories/metrics.py `_accumulate`): a key's
    # sums are those of llm_usage_daily's rows of that key over every agent
    *(
        sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable)
        for c in llm_usage_daily.columns
        if c.name != "agent_id"
    ),
    sqlite_with_rowid=False,
)

# revision 0041: each agent's calls and cost per UTC day and task type (the budgets' reads)
llm_usage_agent_daily = sa.Table(
    "llm_usage_agent_daily",
    metadata,
    # written with llm_usage_daily (store/repositories/metrics.py `_accumulate`): a key's
    # sums are those of llm_usage_daily's rows of that day, agent and task type
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("agent_id", sa.String(64), primary_key=True),
    sa.Column("task_type", sa.String(64), primary_key=True),  # "" for a call without one
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sqlite_with_rowid=False,
)

# revision 0041: the successful calls' latency and TTFT per UTC day as log-spaced histograms
llm_usage_speed = sa.Table(
    "llm_usage_speed",
    metadata,
    # written by store/repositories/metrics_speed.py in the transaction of each insert into
    # llm_usage_metrics (metrics.py; status ok only); a key's calls equal SQL over its rows
    sa.Column("day", sa.String(10), primary_key=True),  # YYYY-MM-DD of the call (UTC)
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(200), primary_key=True),
    sa.Column("source", sa.String(8), primary_key=True),  # live | imported
    sa.Column("metric", sa.String(8), primary_key=True),  # latency | ttft
    sa.Column("bucket", sa.Integer, primary_key=True),  # metrics_speed.speed_bucket of the value
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("min_ms", sa.BigInteger, nullable=False),  # the bucket's smallest value seen
    sa.Column("max_ms", sa.BigInteger, nullable=False),  # and its largest
    sqlite_with_rowid=False,  # stored in key order: a period's rows are read in one run
)

# revision 0031: MCP servers added in the dashboard (issue 34); `[mcp.servers.<name>]` of
# the config wins on a name clash
mcp_servers = sa.Table(
    "mcp_servers",
    metadata,
    sa.Column("name", sa.String(40), primary_key=True),  # the namespace mcp__<name>
    # McpServerConfig's fields but the secrets (command/args/env/read_paths/network, or
    # url/headers/allow_private), as the dashboard saved them
    sa.Column("config_json", sa.JSON, nullable=False),
    # a Fernet token of {"bearer_token": …, "headers": {…}, "env": {…}}; never in clear
    sa.Column("secrets_encrypted", sa.Text),
    # what the page shows of them: {"bearer_token": "last4", "headers": {"X-Key": "last4"}, …}
    sa.Column("secrets_shown_json", sa.JSON, nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),  # 1, then one more at each edit
    sa.Column("updated_by", sa.String(200), nullable=False),  # a token's name, or "local"
    _created(),
    _updated(),
)

# ------------------------------------------------------- schedules (issue 37, §1; 0034)
SCHEDULE_KINDS = ("cron", "every", "at")
SCHEDULE_CATCH_UPS = ("once", "skip")
SCHEDULE_RUN_STATUSES = ("running", "succeeded", "failed", "skipped", "abandoned")
SCHEDULE_RUN_TRIGGERS = ("slot", "late", "manual")

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    _agent_fk(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),  # cron | every | at
    sa.Column("cron", sa.String(200)),  # 5 fields, read in `timezone`
    sa.Column("timezone", sa.String(64)),  # an IANA name (cron only)
    sa.Column("every_secs", sa.Integer),  # slots: anchor_at + k * every_secs
    sa.Column("at", UtcDateTime),  # the one slot of a one-shot schedule
    sa.Column("anchor_at", UtcDateTime, nullable=False),
    sa.Column("action_json", sa.JSON, nullable=False),  # what a run does (schedules/spec.py)
    sa.Column("catch_up", sa.String(8), nullable=False, server_default="once"),
    sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_by", sa.String(200), nullable=False),  # api, cli, mcp, agent, …
    sa.Column("last_slot", UtcDateTime),  # the latest slot claimed (run or skipped)
    sa.Column("resumed_at", UtcDateTime),  # slots at or before it are not run (paused then)
    _created(),
    sa.Column("updated_at", UtcDateTime, nullable=False, index=True),  # definition changes
    sa.CheckConstraint(_in("kind", SCHEDULE_KINDS), name="kind"),
    sa.CheckConstraint(_in("catch_up", SCHEDULE_CATCH_UPS), name="catch_up"),
)

schedule_runs = sa.Table(
    "schedule_runs",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column(
        "schedule_id", Uuid, sa.ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("agent_id", Uuid, nullable=False, index=True),
    sa.Column("slot", UtcDateTime, nullable=False),  # the time the run was due
    sa.Column("trigger", sa.String(8), nullable=False),  # slot | late | manual
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("process", sa.String(200), nullable=False),  # the lease owner that ran it
    sa.Column("started_at", UtcDateTime, nullable=False),
    sa.Column("ended_at", UtcDateTime),
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("session_id", sa.String(36)),  # what it produced: the turn's session …
    sa.Column("ticket_id", sa.String(36)),  # … or the ticket it created
    sa.Column("detail", sa.Text),  # the reply, the error, why it was skipped
    sa.Column("acknowledged_at", UtcDateTime),  # a failed run a person has seen (inbox)
    sa.UniqueConstraint("schedule_id", "slot"),  # a slot is claimed once, ever
    sa.Index(None, "schedule_id", "started_at"),
    sa.CheckConstraint(_in("status", SCHEDULE_RUN_STATUSES), name="status"),
    sa.CheckConstraint(_in("trigger", SCHEDULE_RUN_TRIGGERS), name="trigger"),
)

# ---------------------------------------------------------- the inbox (issue 37, §2; 0035)
inbox_items = sa.Table(
    "inbox_items",
    metadata,
    # one row per inbox item ever noticed (reports/inbox.py): the process that inserts it
    # sends its notification (opencrab/inbox/notifier.py); alerts and alarms are dismissed here
    sa.Column("key", sa.String(300), primary_key=True),  # "<kind>:<subject>"
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("agent_id", sa.String(64)),
    sa.Column("summary", sa.String(500), nullable=False, server_default=""),
    sa.Column("first_seen_at", UtcDateTime, nullable=False, index=True),
    # sending | sent | failed | quiet (not notified: noticed while nothing was configured)
    sa.Column("notify_status", sa.String(16), nullable=False),
    sa.Column("notify_owner", sa.String(200)),  # the process that claimed the sending
    sa.Column("notify_claimed_at", UtcDateTime),
    sa.Column("notified_at", UtcDateTime),
    sa.Column("notify_error", sa.String(500)),  # per outlet, never a URL or a secret
    sa.Column("dismissed_at", UtcDateTime),
    sa.Column("dismissed_by", sa.String(200)),
)

inbox_secrets = sa.Table(
    "inbox_secrets",
    metadata,
    # secrets of the inbox's outlets set through the API (the webhook's signing secret),
    # encrypted with the data directory's key (config/secret_key.py)
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value_encrypted", sa.Text, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

# revision 0039: the agent a chat conversation chose with its gateway's command (Telegram's
# `/use <agent>`), kept across restarts; gone with its agent
chat_agents = sa.Table(
    "chat_agents",
    metadata,
    sa.Column("gateway", sa.String(100), primary_key=True),
    sa.Column("conversation", sa.String(500), primary_key=True),
    _agent_fk(),
    sa.Column("set_by", sa.String(200), nullable=False, server_default=""),
    _updated(),
)

# revision 0036: A2A tasks backed by tickets (issue 36)
a2a_tasks = sa.Table(
    "a2a_tasks",
    metadata,
    # an A2A task backed by a ticket (opencrab.a2a.server_tasks): the task's id is the
    # ticket's; its state is read from the ticket. Kept here: the caller's contextId and,
    # once canceled over A2A, who canceled it (the ticket itself is then `failed`)
    sa.Column("ticket_id", Uuid, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("agent_id", Uuid, sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    sa.Column("context_id", sa.String(200), nullable=False, index=True),
    sa.Column("canceled_by", sa.String(200)),
    _created(),
)

# revision 0038: chat-platform gateways' settings made on the dashboard (issue 38), merged
# under the config file's `[gateway.<name>]` table when the gateway is built (a key the
# file sets wins). Secrets (the config model's SecretStr fields) are one Fernet token of
# {key: value}, encrypted with the key of the LLM API keys (config/secret_key.py).
gateway_settings = sa.Table(
    "gateway_settings",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),  # the registered gateway's name
    sa.Column("settings_json", sa.JSON, nullable=False),  # its table's keys but the secrets
    sa.Column("secrets_encrypted", sa.Text),  # a Fernet token of {"bot_token": …}; or None
    sa.Column("secrets_shown_json", sa.JSON, nullable=False),  # {"bot_token": "…last4"}
    sa.Column("updated_by", sa.String(200), nullable=False),  # a token's name, or "local"
    _updated(),
)
