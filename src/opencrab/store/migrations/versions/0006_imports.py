"""Imported coding-agent transcripts (seed 003): sessions, their lines, their problems.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from opencrab.store.types import UtcDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    big = sa.BigInteger()
    op.create_table(
        "import_sessions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("file_path", sa.Text(), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=True),
        sa.Column("agent_id", sa.String(length=36), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("provider", sa.String(length=64), nullable=True),
        sa.Column("started_at", UtcDateTime(), nullable=True),
        sa.Column("ended_at", UtcDateTime(), nullable=True),
        sa.Column("lines", sa.Integer(), server_default="0", nullable=False),
        sa.Column("bytes", big, server_default="0", nullable=False),
        sa.Column("prefix_sha256", sa.String(length=64), nullable=False),
        sa.Column("file_size", big, server_default="0", nullable=False),
        sa.Column("file_mtime", sa.Float(), nullable=True),
        sa.Column("messages", sa.Integer(), server_default="0", nullable=False),
        sa.Column("problems", sa.Integer(), server_default="0", nullable=False),
        sa.Column("kinds_json", sa.JSON(), server_default="{}", nullable=False),
        sa.Column("calls", sa.Integer(), server_default="0", nullable=False),
        sa.Column("input_tokens", big, server_default="0", nullable=False),
        sa.Column("cached_input_tokens", big, server_default="0", nullable=False),
        sa.Column("output_tokens", big, server_default="0", nullable=False),
        sa.Column("reasoning_output_tokens", big, server_default="0", nullable=False),
        sa.Column("total_tokens", big, server_default="0", nullable=False),
        sa.Column("cost_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("header_json", sa.JSON(), nullable=True),
        sa.Column("last_event_id", sa.String(length=36), nullable=True),
        sa.Column("last_generation_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("source IN ('codex', 'claude')", name=op.f("ck_import_sessions_source")),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_import_sessions_agent_id_agents"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_import_sessions")),
        sa.UniqueConstraint(
            "source", "file_path", name=op.f("uq_import_sessions_source_file_path")
        ),
    )
    op.create_index(
        op.f("ix_import_sessions_agent_id"), "import_sessions", ["agent_id"], unique=False
    )
    op.create_table(
        "import_chunks",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("first_line", sa.Integer(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("raw_bytes", big, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["import_sessions.id"],
            name=op.f("fk_import_chunks_session_id_import_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "first_line", name=op.f("pk_import_chunks")),
    )
    op.create_table(
        "import_problems",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["import_sessions.id"],
            name=op.f("fk_import_problems_session_id_import_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_import_problems")),
    )
    op.create_index(
        op.f("ix_import_problems_session_id_line"),
        "import_problems",
        ["session_id", "line"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_import_problems_session_id_line"), table_name="import_problems")
    op.drop_table("import_problems")
    op.drop_table("import_chunks")
    op.drop_index(op.f("ix_import_sessions_agent_id"), table_name="import_sessions")
    op.drop_table("import_sessions")
