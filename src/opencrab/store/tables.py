"""Every table, declared once with SQLAlchemy Core.

See docs/architecture.md, "One model for every specification".

Seed 001's persona/memory/skills/metrics tables and seed 002's agents/tools/tickets/
steps/sessions/messages share one schema: `agents` is 002's row and 001's soul,
identity, memory, skills, impressions and heartbeat log hang off it by `agent_id`;
`sessions` serves 001's discussions, 002's ticket sessions and gateway chats through
`kind`; `events` is seed 000's AgentEvent log. JSON columns keep the seeds' `*_json`
names. Alembic migrations create exactly these; a test checks that they agree.
Dialect-specific objects (the FTS5 index on memory_sessions) are not declared here.
"""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.store.types import UtcDateTime, Uuid

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TICKET_STATUSES = ("pending", "running", "suspended", "completed", "failed")
TICKET_SESSION_STATUSES = ("active", "suspended", "completed", "failed")
CONSOLIDATION_STATUSES = ("done", "failed", "empty")
STEP_STATUSES = ("pending", "running", "completed", "failed")
MESSAGE_ROLES = ("user", "assistant", "system", "tool")
SESSION_KINDS = ("chat", "discussion", "ticket")
SKILL_CHANGES = ("created", "refined", "edited", "file", "recorded")
EVENT_TYPES = ("user", "reasoning", "tool_call", "tool_result", "message", "token_usage")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _agent_fk(*, primary_key: bool = False) -> sa.Column[str]:
    return sa.Column(
        "agent_id",
        Uuid,
        sa.ForeignKey("agents.id", ondelete="CASCADE"),
        primary_key=primary_key,
        nullable=False,
    )


def _created() -> sa.Column[object]:
    return sa.Column("created_at", UtcDateTime, nullable=False)


def _updated() -> sa.Column[object]:
    return sa.Column("updated_at", UtcDateTime, nullable=False)


# ---------------------------------------------------------------- seed 002: agents, tools
agents = sa.Table(
    "agents",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("description", sa.Text),
    sa.Column("prompt", sa.Text, nullable=False),
    # seed 001 AgentLlmConfig and HeartbeatConfig, keyed by the agent
    sa.Column("llm_config_json", sa.JSON),
    sa.Column("heartbeat_json", sa.JSON),
    _created(),
    _updated(),
    # en, ja or zh; NULL follows the server's [agent] language
    sa.Column("language", sa.String(8)),
)

tools = sa.Table(
    "tools",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column("name", sa.String(100), nullable=False, unique=True),
    sa.Column("description", sa.Text),
    sa.Column("schema", sa.JSON, nullable=False),
    _created(),
)

agent_tools = sa.Table(
    "agent_tools",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column("tool_id", Uuid, sa.ForeignKey("tools.id", ondelete="CASCADE"), primary_key=True),
)

# revision 0017: which of the seed tools that reach outside the workspace an agent may
# use (execute_command, http_request, fetch_webpage); no row: all of them off
agent_tool_settings = sa.Table(
    "agent_tool_settings",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column("settings_json", sa.JSON, nullable=False),
    _updated(),
)

# ------------------------------------------- tool calls waiting for a person (issue 20)
APPROVAL_STATUSES = ("pending", "approved", "denied")
FOLLOW_UP_STATUSES = ("pending", "done", "dropped")

pending_approvals = sa.Table(
    "pending_approvals",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    _agent_fk(),
    sa.Column("trace_id", Uuid, nullable=False),
    sa.Column("tool_name", sa.String(100), nullable=False),
    sa.Column("arguments_json", sa.JSON, nullable=False),
    sa.Column("call_id", sa.String(200), nullable=False),  # the model's id of the call
    sa.Column("call_event_id", Uuid, nullable=False),  # its tool_call event
    sa.Column("status", sa.String(16), nullable=False, server_default="pending", index=True),
    _created(),
    sa.Column("decided_at", UtcDateTime),
    sa.Column("decided_by", sa.String(200)),
    sa.Column("reason", sa.Text),
    sa.Column("result_event_id", Uuid),  # the tool_result event the decision wrote
    # the turn that continues the session once its last waiting call is decided
    # (core/approval_followups.py): pending, done or dropped; None when there is none
    sa.Column("follow_up", sa.String(16), index=True),
    sa.Column("answered_by", Uuid),  # the approval whose follow-up answers this decision
    sa.Column("follow_up_json", sa.JSON),  # the follow-up turn's closing steps (step_json)
    sa.Column("followed_up_at", UtcDateTime),
    sa.CheckConstraint(_in("status", APPROVAL_STATUSES), name="status"),
    sa.CheckConstraint(_in("follow_up", FOLLOW_UP_STATUSES), name="follow_up"),
)

# ---------------------------------------------------------------- seed 002: tickets, steps
tickets = sa.Table(
    "tickets",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column("agent_id", Uuid, sa.ForeignKey("agents.id"), nullable=False, index=True),
    sa.Column("status", sa.String(20), nullable=False, server_default="pending", index=True),
    sa.Column("params", sa.JSON),
    sa.Column("context", sa.JSON),
    sa.Column("error_message", sa.Text),
    _created(),
    _updated(),
    sa.CheckConstraint(_in("status", TICKET_STATUSES), name="status"),
)

steps = sa.Table(
    "steps",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "ticket_id",
        Uuid,
        sa.ForeignKey("tickets.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("status", sa.String(20), nullable=False, server_default="pending"),
    sa.Column("result", sa.JSON),
    _created(),
    _updated(),
    sa.UniqueConstraint("ticket_id", "idx"),
    sa.CheckConstraint(_in("status", STEP_STATUSES), name="status"),
)

# ------------------------------------------------- sessions: 001 discussions + 002 + chats
sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False, server_default="chat"),
    sa.Column("status", sa.String(20), nullable=False, server_default="active", index=True),
    # chat: the agent talked to; 002 ticket sessions: the ticket
    sa.Column("agent_id", Uuid, sa.ForeignKey("agents.id", ondelete="CASCADE"), index=True),
    sa.Column("ticket_id", Uuid, sa.ForeignKey("tickets.id", ondelete="CASCADE"), index=True),
    sa.Column("context", sa.JSON),
    # seed 001 discussion state
    sa.Column("mode", sa.String(32)),
    sa.Column("theme", sa.Text),
    sa.Column("phase", sa.String(32)),
    sa.Column("turn_number", sa.Integer, nullable=False, server_default="0"),
    sa.Column("participant_ids_json", sa.JSON, nullable=False, server_default="[]"),
    sa.Column("facilitator_id", Uuid),
    sa.Column("done_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("max_turns", sa.Integer),
    _created(),
    _updated(),
    sa.CheckConstraint(_in("kind", SESSION_KINDS), name="kind"),
    sa.CheckConstraint(
        f"kind != 'ticket' OR (ticket_id IS NOT NULL AND {_in('status', TICKET_SESSION_STATUSES)})",
        name="ticket_session",
    ),
    sa.CheckConstraint("kind != 'discussion' OR theme IS NOT NULL", name="discussion_theme"),
    sa.Index(None, "updated_at", "id"),  # lists, newest first (revision 0015)
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("timestamp", UtcDateTime, nullable=False),
    sa.Column("event_id", Uuid),  # the AgentEvent this message was written with
    sa.CheckConstraint(_in("role", MESSAGE_ROLES), name="role"),
    # revision 0010: who said it (an agent's id and name, or the person's), and whether
    # the turn was interrupted while it was being said (the text is what came so far)
    sa.Column("speaker_id", sa.String(200)),
    sa.Column("speaker_name", sa.Text),
    sa.Column("interrupted", sa.Boolean, nullable=False, server_default="0"),
)

agent_sessions = sa.Table(
    "agent_sessions",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column(
        "session_id", Uuid, sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("last_speech_at", UtcDateTime),
    sa.Column("done_declared", sa.Boolean, nullable=False, server_default="0"),
)

# ----------------------------------------------------------- seed 001: persona and memory
soul = sa.Table(
    "soul",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column("persona_name", sa.Text, nullable=False),
    sa.Column("social_style_json", sa.JSON, nullable=False, server_default="{}"),
    sa.Column("personality_json", sa.JSON, nullable=False, server_default="{}"),
    sa.Column("thinking_style_json", sa.JSON, nullable=False, server_default="{}"),
    sa.Column("custom_traits_json", sa.JSON),
    _updated(),
)

identity = sa.Table(
    "identity",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("role", sa.String(64), nullable=False, server_default="discussant"),
    sa.Column("job_title", sa.Text),
    sa.Column("organization", sa.Text),
    sa.Column("image_url", sa.Text),
    sa.Column("metadata_json", sa.JSON),
    _updated(),
)

memory_curated = sa.Table(
    "memory_curated",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    _agent_fk(),
    sa.Column("category", sa.String(64), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    _updated(),
    sa.Index(None, "agent_id", "category"),
    # revision 0033: when it was first kept, and how often the same was said again and
    # merged into it (core/memory.py `remember`) instead of being kept twice; a row written
    # without created_at (by older code) reads as created when it was last updated
    sa.Column("created_at", UtcDateTime),
    sa.Column("times_seen", sa.Integer, nullable=False, server_default="1"),
)

memory_sessions = sa.Table(
    "memory_sessions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    _agent_fk(),
    sa.Column("session_id", Uuid, nullable=False),
    sa.Column("log_type", sa.String(32), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("speaker_id", sa.String(64)),
    sa.Column("turn_number", sa.Integer),
    sa.Column("metadata_json", sa.JSON),
    sa.Column("event_id", Uuid),  # the AgentEvent this log line was written with
    _created(),
    sa.Index(None, "agent_id", "session_id"),
)

skills = sa.Table(
    "skills",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    _agent_fk(),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("situation_pattern", sa.Text, nullable=False),
    sa.Column("guidance", sa.Text, nullable=False),
    sa.Column("source_type", sa.String(32), nullable=False, server_default="standard"),
    sa.Column("source_context", sa.Text),
    sa.Column("file_path", sa.Text),
    sa.Column("effectiveness", sa.Float),
    sa.Column("effectiveness_scores", sa.JSON, nullable=False, server_default="[]"),
    sa.Column("usage_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("is_active", sa.Boolean, nullable=False, server_default="1"),
    sa.Column("last_used_at", UtcDateTime),
    _created(),
    _updated(),
    # revision 0003: seed `Skill.version` and `Skill.actions`; one skill per name
    sa.Column("version", sa.Integer, nullable=False, server_default="1"),
    sa.Column("actions_json", sa.JSON, nullable=False, server_default="[]"),
    sa.Index(None, "agent_id", "is_active"),
    sa.UniqueConstraint("agent_id", "name"),
)

# revision 0014: each version of a skill's text, newest MAX_VERSIONS kept (core/skill_versions.py)
skill_versions = sa.Table(
    "skill_versions",
    metadata,
    sa.Column("skill_id", Uuid, sa.ForeignKey("skills.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("situation_pattern", sa.Text, nullable=False),
    sa.Column("guidance", sa.Text, nullable=False),
    sa.Column("actions_json", sa.JSON, nullable=False),
    sa.Column("source_type", sa.String(32), nullable=False),
    sa.Column("source_context", sa.Text),
    sa.Column("change", sa.String(16), nullable=False),
    _created(),
    sa.CheckConstraint(_in("change", SKILL_CHANGES), name="change"),
)

impressions = sa.Table(
    "impressions",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    _agent_fk(),
    sa.Column("session_id", Uuid, nullable=False),
    sa.Column("target_id", sa.String(64), nullable=False),
    sa.Column("target_name", sa.Text, nullable=False),
    sa.Column("personality", sa.Text, server_default=""),
    sa.Column("communication_style", sa.Text, server_default=""),
    sa.Column("recent_behavior", sa.Text, server_default=""),
    sa.Column("agreement", sa.Text, server_default="中立"),
    sa.Column("notes", sa.Text, server_default=""),
    sa.Column("last_updated_turn", sa.Integer, server_default="0"),
    _created(),
    _updated(),
    sa.UniqueConstraint("agent_id", "session_id", "target_id"),
    sa.Index(None, "agent_id", "session_id"),
)

heartbeat_log = sa.Table(
    "heartbeat_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    _agent_fk(),
    sa.Column("decision", sa.String(32), nullable=False),
    sa.Column("result_json", sa.JSON),
    _created(),
    sa.Index("idx_heartbeat_agent", "agent_id"),  # seed 001 DDL; revision 0010
)

# ------------------------------------------------------------------ leases (issue 19)
leases = sa.Table(
    "leases",
    metadata,
    # what is leased: "turn:<session id>", "heartbeat:<agent id>" (later "ticket:<id>")
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),  # the process (store.leases)
    sa.Column("acquired_at", UtcDateTime, nullable=False),
    sa.Column("renewed_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Index(None, "owner"),
)

# ------------------------------------------------------------- seed 001: LLM metrics
llm_usage_metrics = sa.Table(
    "llm_usage_metrics",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    sa.Column("agent_id", sa.String(64), nullable=False, index=True),
    sa.Column("session_id", sa.String(64)),
    sa.Column("timestamp", UtcDateTime, nullable=False, index=True),
    sa.Column("provider", sa.String(64), nullable=False),
    sa.Column("model", sa.String(200), nullable=False, index=True),
    sa.Column("purpose", sa.String(32), nullable=False, index=True),
    sa.Column("task_type", sa.String(64)),
    sa.Column("complexity", sa.String(16)),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("total_tokens", sa.Integer, nullable=False),
    sa.Column("estimated_cost_usd", sa.Float, nullable=False),
    sa.Column("latency_ms", sa.Integer, nullable=False),
    sa.Column("time_to_first_token_ms", sa.Integer),
    sa.Column("quality_score", sa.Float),
    sa.Column("self_evaluation", sa.Text),
    sa.Column("task_success", sa.Boolean),
    sa.Column("would_use_again", sa.Boolean),
    sa.Column("better_model_suggestion", sa.Text),
    _created(),
    # revision 0002: one row per attempt, failures included
    sa.Column("status", sa.String(16), nullable=False, server_default="ok"),
    sa.Column("error_type", sa.String(64)),
    sa.Column("error", sa.Text),
    sa.Column("cache_read_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("reasoning_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cost_source", sa.String(16), nullable=False, server_default="pricing"),
    sa.Column("stream", sa.Boolean, nullable=False, server_default="0"),
    sa.Column("request_id", Uuid, index=True),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    # revision 0009: the provider/model whose failure led to this attempt
    sa.Column("fallback_from", sa.String(265)),
)

model_pricing = sa.Table(
    "model_pricing",
    metadata,
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(200), primary_key=True),
    sa.Column("input_price_per_1m", sa.Float, nullable=False),
    sa.Column("output_price_per_1m", sa.Float, nullable=False),
    sa.Column("context_window", sa.Integer),
    # prompt-cache rates (null: those tokens cost what other input costs); migration 0007
    sa.Column("cache_read_price_per_1m", sa.Float),
    sa.Column("cache_write_price_per_1m", sa.Float),
    _updated(),
)

# ------------------------------------------------------------- seed 000: the event log
events = sa.Table(
    "events",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),  # insertion order
    sa.Column("id", Uuid, nullable=False, unique=True),
    sa.Column("trace_id", Uuid, nullable=False),
    sa.Column("parent_id", Uuid),
    sa.Column("type", sa.String(16), nullable=False),
    # fixed-width RFC 3339 UTC text on every dialect (format_timestamp): sorts as time
    sa.Column("timestamp", sa.String(32), nullable=False),
    sa.Column("content", sa.Text, nullable=False),  # the payload's JSON
    sa.Column("metadata", sa.Text),  # JSON, absent when null
    sa.Column("tool_call_id", Uuid),  # tool_result only: the call it answers
    sa.CheckConstraint(_in("type", EVENT_TYPES), name="type"),
    sa.Index(None, "trace_id", "seq"),
)

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

# ------------------------------------------- seed 003: imported coding-agent transcripts
IMPORT_SOURCES = ("codex", "claude")

import_sessions = sa.Table(
    "import_sessions",
    metadata,
    sa.Column("id", Uuid, primary_key=True),  # also the trace id of its events
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("file_path", sa.Text, nullable=False),
    sa.Column("external_id", sa.String(200)),  # the session id the file gives itself
    sa.Column("agent_id", Uuid, sa.ForeignKey("agents.id", ondelete="SET NULL"), index=True),
    sa.Column("title", sa.Text),
    sa.Column("model", sa.String(200)),
    sa.Column("provider", sa.String(64)),
    sa.Column("started_at", UtcDateTime),
    sa.Column("ended_at", UtcDateTime),
    # what has been read: the next import starts after `lines` lines / `bytes` bytes
    sa.Column("lines", sa.Integer, nullable=False, server_default="0"),
    sa.Column("bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("prefix_sha256", sa.String(64), nullable=False),  # of those bytes
    sa.Column("file_size", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("file_mtime", sa.Float),
    sa.Column("messages", sa.Integer, nullable=False, server_default="0"),
    sa.Column("problems", sa.Integer, nullable=False, server_default="0"),
    sa.Column("kinds_json", sa.JSON, nullable=False, server_default="{}"),
    sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cached_input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("reasoning_output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("total_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("header_json", sa.JSON),
    sa.Column("last_event_id", Uuid),  # where the next import continues the chain
    sa.Column("last_generation_id", Uuid),  # what the next token_usage may hang off
    _created(),
    _updated(),
    sa.Column("project", sa.Text),  # the working directory the session header names
    # lines whose message text is in import_texts (the rest is indexed on first search)
    sa.Column("texts_indexed_lines", sa.Integer, nullable=False, server_default="0"),
    sa.UniqueConstraint("source", "file_path"),
    sa.CheckConstraint(_in("source", IMPORT_SOURCES), name="source"),
)

import_chunks = sa.Table(
    "import_chunks",
    metadata,
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("import_sessions.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("first_line", sa.Integer, primary_key=True),  # 1-based
    sa.Column("lines", sa.Integer, nullable=False),
    sa.Column("raw_bytes", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),  # the lines as read, zstd
)

import_problems = sa.Table(
    "import_problems",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("import_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("line", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Index(None, "session_id", "line"),
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

# ---------------------------------------------------------------- seed 004: agent mode
AGENT_MODE_SESSION_STATUSES = ("Active", "Paused", "Completed", "Failed")

agent_mode_sessions = sa.Table(
    "agent_mode_sessions",  # an index of the session files (the files are the truth)
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("repository_path", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("title", sa.Text, nullable=False),  # the request's first line, shortened
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("file_path", sa.Text, nullable=False),
    sa.Column("tasks_total", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_pending", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_ready", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_running", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_completed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_failed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_cancelled", sa.Integer, nullable=False, server_default="0"),
    _created(),
    sa.Column("updated_at", UtcDateTime, nullable=False, index=True),
    sa.CheckConstraint(_in("status", AGENT_MODE_SESSION_STATUSES), name="status"),
)

# revision 0024: the cost dashboard's per-agent and per-purpose (live / imported) reads
# over a period (store/repositories/llm_analytics.py)
sa.Index(None, llm_usage_metrics.c.agent_id, llm_usage_metrics.c.timestamp)
sa.Index(None, llm_usage_metrics.c.purpose, llm_usage_metrics.c.timestamp)

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

# revision 0023: imported transcripts' message texts, searchable
import_texts = sa.Table(
    "import_texts",
    metadata,
    # the text of imported user and assistant messages, for full-text search (SQLite:
    # the FTS5 table import_texts_fts; PostgreSQL: a pg_trgm GIN index on `text`)
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("import_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("line", sa.Integer, nullable=False),  # 1-based, as the file has it
    sa.Column("part", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),  # user or assistant
    sa.Column("timestamp", UtcDateTime, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.UniqueConstraint("session_id", "line", "part"),
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
    # written by store/repositories/metrics.py in the transaction of each insert into
    # llm_usage_metrics (status ok only); a key's calls equal SQL over its rows
    sa.Column("day", sa.String(10), primary_key=True),  # YYYY-MM-DD of the call (UTC)
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(200), primary_key=True),
    sa.Column("source", sa.String(8), primary_key=True),  # live | imported
    sa.Column("metric", sa.String(8), primary_key=True),  # latency | ttft
    sa.Column("bucket", sa.Integer, primary_key=True),  # metrics.speed_bucket of the value
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

# revision 0032: memory search's vector leg (issue 35). One vector per session log line and
# embedder ("model": "opencrab/multilingual-e5-small", "openai/text-embedding-3-small", …),
# float32 little-endian; `seq` grows with every insert, so an in-process index reads only
# what is new (core/memory_vectors.py). Written off the turn's path by core/memory_index.py.
memory_embeddings = sa.Table(
    "memory_embeddings",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "log_id",
        sa.Integer,
        sa.ForeignKey("memory_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _agent_fk(),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("dim", sa.Integer, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.UniqueConstraint("log_id", "model"),
    sa.Index(None, "agent_id", "model", "seq"),
)

# revision 0032: the embedder each agent's memory is indexed with now, and how that goes
memory_embedders = sa.Table(
    "memory_embedders",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("dim", sa.Integer),  # None until the first vector is written
    sa.Column("error", sa.Text),  # the last pass's failure, None when it went well
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

# revision 0033: how far each session's lines were consolidated into memory at its end
# (core/consolidation.py): lines above `last_log_id` are new since
memory_consolidations = sa.Table(
    "memory_consolidations",
    metadata,
    _agent_fk(primary_key=True),
    sa.Column("session_id", Uuid, primary_key=True),
    sa.Column("last_log_id", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("memories", sa.Integer, nullable=False, server_default="0"),
    sa.Column("merged", sa.Integer, nullable=False, server_default="0"),
    sa.Column("impressions", sa.Integer, nullable=False, server_default="0"),
    sa.Column("detail_json", sa.JSON),
    _created(),
    _updated(),
    sa.CheckConstraint(_in("status", CONSOLIDATION_STATUSES), name="status"),
)

# revision 0033: one `opencrab memory eval` run over an agent's own memories
# (core/memory_eval.py): its question set's size and each search leg's figures
memory_eval_runs = sa.Table(
    "memory_eval_runs",
    metadata,
    sa.Column("id", Uuid, primary_key=True),
    _agent_fk(),
    sa.Column("questions", sa.Integer, nullable=False),
    sa.Column("generator", sa.String(32), nullable=False),
    sa.Column("legs_json", sa.JSON, nullable=False),
    _created(),
    sa.Index(None, "agent_id", "created_at"),
)
