"""Every table, declared once with SQLAlchemy Core.

See docs/architecture.md, "One model for every specification".

Seed 001's persona/memory/skills/metrics tables and seed 002's agents/tools/tickets/
steps/sessions/messages share one schema: `agents` is 002's row and 001's soul,
identity, memory, skills, impressions and heartbeat log hang off it by `agent_id`;
`sessions` serves 001's discussions, 002's ticket sessions and gateway chats through
`kind`; `events` is seed 000's AgentEvent log. JSON columns keep the seeds' `*_json`
names. Alembic migrations create exactly these; a test checks that they agree.
Dialect-specific objects (the FTS5 index on memory_sessions) are not declared here.

This module declares seeds 000-002's tables and re-exports the rest (store/tables_ops.py,
store/tables_imports.py), all on the one `metadata` of store/table_base.py: import every
table from here.
"""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.store.table_base import _agent_fk, _created, _in, _updated
from opencrab.store.table_base import metadata as metadata  # every table's
from opencrab.store.tables_imports import *  # noqa: F403  (re-exported)
from opencrab.store.tables_ops import *  # noqa: F403  (re-exported)
from opencrab.store.types import UtcDateTime, Uuid

TICKET_STATUSES = ("pending", "running", "suspended", "completed", "failed")
TICKET_SESSION_STATUSES = ("active", "suspended", "completed", "failed")
CONSOLIDATION_STATUSES = ("done", "failed", "empty")
STEP_STATUSES = ("pending", "running", "completed", "failed")
MESSAGE_ROLES = ("user", "assistant", "system", "tool")
SESSION_KINDS = ("chat", "discussion", "ticket")
SKILL_CHANGES = ("created", "refined", "edited", "file", "recorded")
EVENT_TYPES = ("user", "reasoning", "tool_call", "tool_result", "message", "token_usage")


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

# revision 0024: the cost dashboard's per-agent and per-purpose (live / imported) reads
# over a period (store/repositories/llm_analytics.py)
sa.Index(None, llm_usage_metrics.c.agent_id, llm_usage_metrics.c.timestamp)
sa.Index(None, llm_usage_metrics.c.purpose, llm_usage_metrics.c.timestamp)

# revision 0032: memory search's vector leg (issue 35). One vector per session log line and
# embedder ("model": "opencrab/multilingual-e5-small", "openai/text-embedding-3-small", …),
# float32 little-endian; `seq` grows with every insert, so an in-process index reads only
# what is new (core/memory_vectors.py). Written off the turn's path by core/memory_index.py.
# On PostgreSQL with pgvector (revision 0042) the table also has `embedding vector` and an
# HNSW index per dimension, declared nowhere here: they exist only where the extension does
# (store/repositories/memory_vectors.py).
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
