"""initial schema: seeds 000, 001, 002

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Every table of seeds 000, 001 and 002 as opencrab.store.tables declares them, plus the
index over memory session logs: an FTS5 table on SQLite, a pg_trgm GIN index on
PostgreSQL (opencrab.store.dialects.postgresql).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types
from opencrab.store.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# SQLite only: FTS5 index over memory_sessions, kept in step by triggers.
FTS_CREATE = (
    """CREATE VIRTUAL TABLE memory_sessions_fts USING fts5(
        content, agent_id UNINDEXED, session_id UNINDEXED, log_type UNINDEXED,
        content='memory_sessions', content_rowid='id', tokenize='trigram'
    )""",
    """CREATE TRIGGER memory_sessions_fts_insert AFTER INSERT ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(rowid, content, agent_id, session_id, log_type)
        VALUES (new.id, new.content, new.agent_id, new.session_id, new.log_type);
    END""",
    """CREATE TRIGGER memory_sessions_fts_delete AFTER DELETE ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(memory_sessions_fts, rowid, content, agent_id, session_id, log_type)
        VALUES ('delete', old.id, old.content, old.agent_id, old.session_id, old.log_type);
    END""",
    """CREATE TRIGGER memory_sessions_fts_update AFTER UPDATE ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(memory_sessions_fts, rowid, content, agent_id, session_id, log_type)
        VALUES ('delete', old.id, old.content, old.agent_id, old.session_id, old.log_type);
        INSERT INTO memory_sessions_fts(rowid, content, agent_id, session_id, log_type)
        VALUES (new.id, new.content, new.agent_id, new.session_id, new.log_type);
    END""",
)
FTS_DROP = (
    "DROP TRIGGER IF EXISTS memory_sessions_fts_update",
    "DROP TRIGGER IF EXISTS memory_sessions_fts_delete",
    "DROP TRIGGER IF EXISTS memory_sessions_fts_insert",
    "DROP TABLE IF EXISTS memory_sessions_fts",
)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("llm_config_json", sa.JSON(), nullable=True),
        sa.Column("heartbeat_json", sa.JSON(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
    )
    op.create_table(
        "events",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("trace_id", sa.String(length=36), nullable=False),
        sa.Column("parent_id", sa.String(length=36), nullable=True),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("timestamp", sa.String(length=32), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=True),
        sa.Column("tool_call_id", sa.String(length=36), nullable=True),
        sa.CheckConstraint(
            "type IN ('user', 'reasoning', 'tool_call', 'tool_result', 'message', 'token_usage')",
            name=op.f("ck_events_type"),
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_events")),
        sa.UniqueConstraint("id", name=op.f("uq_events_id")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_events_trace_id_seq"), ["trace_id", "seq"], unique=False
        )

    op.create_table(
        "llm_usage_metrics",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=True),
        sa.Column("timestamp", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("task_type", sa.String(length=64), nullable=True),
        sa.Column("complexity", sa.String(length=16), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("total_tokens", sa.Integer(), nullable=False),
        sa.Column("estimated_cost_usd", sa.Float(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("time_to_first_token_ms", sa.Integer(), nullable=True),
        sa.Column("quality_score", sa.Float(), nullable=True),
        sa.Column("self_evaluation", sa.Text(), nullable=True),
        sa.Column("task_success", sa.Boolean(), nullable=True),
        sa.Column("would_use_again", sa.Boolean(), nullable=True),
        sa.Column("better_model_suggestion", sa.Text(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_usage_metrics")),
    )
    with op.batch_alter_table("llm_usage_metrics", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_llm_usage_metrics_agent_id"), ["agent_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_llm_usage_metrics_model"), ["model"], unique=False)
        batch_op.create_index(batch_op.f("ix_llm_usage_metrics_purpose"), ["purpose"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_llm_usage_metrics_timestamp"), ["timestamp"], unique=False
        )

    op.create_table(
        "model_pricing",
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_price_per_1m", sa.Float(), nullable=False),
        sa.Column("output_price_per_1m", sa.Float(), nullable=False),
        sa.Column("context_window", sa.Integer(), nullable=True),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("provider", "model", name=op.f("pk_model_pricing")),
    )
    op.create_table(
        "tools",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("schema", sa.JSON(), nullable=False),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tools")),
        sa.UniqueConstraint("name", name=op.f("uq_tools_name")),
    )
    op.create_table(
        "agent_tools",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("tool_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_tools_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tool_id"], ["tools.id"], name=op.f("fk_agent_tools_tool_id_tools"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("agent_id", "tool_id", name=op.f("pk_agent_tools")),
    )
    op.create_table(
        "heartbeat_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("decision", sa.String(length=32), nullable=False),
        sa.Column("result_json", sa.JSON(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_heartbeat_log_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_heartbeat_log")),
    )
    op.create_table(
        "identity",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("role", sa.String(length=64), server_default="discussant", nullable=False),
        sa.Column("job_title", sa.Text(), nullable=True),
        sa.Column("organization", sa.Text(), nullable=True),
        sa.Column("image_url", sa.Text(), nullable=True),
        sa.Column("metadata_json", sa.JSON(), nullable=True),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_identity_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_identity")),
    )
    op.create_table(
        "impressions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=False),
        sa.Column("target_name", sa.Text(), nullable=False),
        sa.Column("personality", sa.Text(), server_default="", nullable=True),
        sa.Column("communication_style", sa.Text(), server_default="", nullable=True),
        sa.Column("recent_behavior", sa.Text(), server_default="", nullable=True),
        sa.Column("agreement", sa.Text(), server_default="中立", nullable=True),
        sa.Column("notes", sa.Text(), server_default="", nullable=True),
        sa.Column("last_updated_turn", sa.Integer(), server_default="0", nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_impressions_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_impressions")),
        sa.UniqueConstraint(
            "agent_id",
            "session_id",
            "target_id",
            name=op.f("uq_impressions_agent_id_session_id_target_id"),
        ),
    )
    with op.batch_alter_table("impressions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_impressions_agent_id_session_id"),
            ["agent_id", "session_id"],
            unique=False,
        )

    op.create_table(
        "memory_curated",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_memory_curated_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_curated")),
    )
    with op.batch_alter_table("memory_curated", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_curated_agent_id_category"),
            ["agent_id", "category"],
            unique=False,
        )

    op.create_table(
        "memory_sessions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("log_type", sa.String(length=32), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("speaker_id", sa.String(length=64), nullable=True),
        sa.Column("turn_number", sa.Integer(), nullable=True),
        sa.Column("metadata_json", sa.JSON(), nullable=True),
        sa.Column("event_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_memory_sessions_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_sessions")),
    )
    with op.batch_alter_table("memory_sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_sessions_agent_id_session_id"),
            ["agent_id", "session_id"],
            unique=False,
        )

    op.create_table(
        "skills",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("situation_pattern", sa.Text(), nullable=False),
        sa.Column("guidance", sa.Text(), nullable=False),
        sa.Column("source_type", sa.String(length=32), server_default="standard", nullable=False),
        sa.Column("source_context", sa.Text(), nullable=True),
        sa.Column("file_path", sa.Text(), nullable=True),
        sa.Column("effectiveness", sa.Float(), nullable=True),
        sa.Column("usage_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("is_active", sa.Boolean(), server_default="1", nullable=False),
        sa.Column("last_used_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_skills_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_skills")),
    )
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_skills_agent_id_is_active"), ["agent_id", "is_active"], unique=False
        )

    op.create_table(
        "soul",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("persona_name", sa.Text(), nullable=False),
        sa.Column("social_style_json", sa.JSON(), server_default="{}", nullable=False),
        sa.Column("personality_json", sa.JSON(), server_default="{}", nullable=False),
        sa.Column("thinking_style_json", sa.JSON(), server_default="{}", nullable=False),
        sa.Column("custom_traits_json", sa.JSON(), nullable=True),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_soul_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_soul")),
    )
    op.create_table(
        "tickets",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=20), server_default="pending", nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("context", sa.JSON(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'suspended', 'completed', 'failed')",
            name=op.f("ck_tickets_status"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_tickets_agent_id_agents")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tickets")),
    )
    with op.batch_alter_table("tickets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tickets_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_tickets_status"), ["status"], unique=False)

    op.create_table(
        "sessions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=16), server_default="chat", nullable=False),
        sa.Column("status", sa.String(length=20), server_default="active", nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=True),
        sa.Column("ticket_id", sa.String(length=36), nullable=True),
        sa.Column("context", sa.JSON(), nullable=True),
        sa.Column("mode", sa.String(length=32), nullable=True),
        sa.Column("theme", sa.Text(), nullable=True),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.Column("turn_number", sa.Integer(), server_default="0", nullable=False),
        sa.Column("participant_ids_json", sa.JSON(), server_default="[]", nullable=False),
        sa.Column("facilitator_id", sa.String(length=36), nullable=True),
        sa.Column("done_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("max_turns", sa.Integer(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "kind != 'discussion' OR theme IS NOT NULL", name=op.f("ck_sessions_discussion_theme")
        ),
        sa.CheckConstraint(
            "kind != 'ticket' OR (ticket_id IS NOT NULL AND status IN ('active', 'suspended', 'completed', 'failed'))",
            name=op.f("ck_sessions_ticket_session"),
        ),
        sa.CheckConstraint(
            "kind IN ('chat', 'discussion', 'ticket')", name=op.f("ck_sessions_kind")
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_sessions_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["ticket_id"],
            ["tickets.id"],
            name=op.f("fk_sessions_ticket_id_tickets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sessions_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sessions_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_sessions_ticket_id"), ["ticket_id"], unique=False)

    op.create_table(
        "steps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("ticket_id", sa.String(length=36), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=20), server_default="pending", nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'completed', 'failed')", name=op.f("ck_steps_status")
        ),
        sa.ForeignKeyConstraint(
            ["ticket_id"],
            ["tickets.id"],
            name=op.f("fk_steps_ticket_id_tickets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_steps")),
        sa.UniqueConstraint("ticket_id", "idx", name=op.f("uq_steps_ticket_id_idx")),
    )
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_steps_ticket_id"), ["ticket_id"], unique=False)

    op.create_table(
        "agent_sessions",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("last_speech_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("done_declared", sa.Boolean(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_sessions_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_agent_sessions_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "session_id", name=op.f("pk_agent_sessions")),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("timestamp", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=True),
        sa.CheckConstraint(
            "role IN ('user', 'assistant', 'system', 'tool')", name=op.f("ck_messages_role")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_messages_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_messages_session_id"), ["session_id"], unique=False)

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in FTS_CREATE:
            op.execute(statement)
    elif dialect == "postgresql":
        for statement in postgresql.SEARCH_CREATE:
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in FTS_DROP:
            op.execute(statement)
    elif dialect == "postgresql":
        for statement in postgresql.SEARCH_DROP:
            op.execute(statement)
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_session_id"))

    op.drop_table("messages")
    op.drop_table("agent_sessions")
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_steps_ticket_id"))

    op.drop_table("steps")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_ticket_id"))
        batch_op.drop_index(batch_op.f("ix_sessions_status"))
        batch_op.drop_index(batch_op.f("ix_sessions_agent_id"))

    op.drop_table("sessions")
    with op.batch_alter_table("tickets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tickets_status"))
        batch_op.drop_index(batch_op.f("ix_tickets_agent_id"))

    op.drop_table("tickets")
    op.drop_table("soul")
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_skills_agent_id_is_active"))

    op.drop_table("skills")
    with op.batch_alter_table("memory_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_sessions_agent_id_session_id"))

    op.drop_table("memory_sessions")
    with op.batch_alter_table("memory_curated", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_curated_agent_id_category"))

    op.drop_table("memory_curated")
    with op.batch_alter_table("impressions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_impressions_agent_id_session_id"))

    op.drop_table("impressions")
    op.drop_table("identity")
    op.drop_table("heartbeat_log")
    op.drop_table("agent_tools")
    op.drop_table("tools")
    op.drop_table("model_pricing")
    with op.batch_alter_table("llm_usage_metrics", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_usage_metrics_timestamp"))
        batch_op.drop_index(batch_op.f("ix_llm_usage_metrics_purpose"))
        batch_op.drop_index(batch_op.f("ix_llm_usage_metrics_model"))
        batch_op.drop_index(batch_op.f("ix_llm_usage_metrics_agent_id"))

    op.drop_table("llm_usage_metrics")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_trace_id_seq"))

    op.drop_table("events")
    op.drop_table("agents")
