"""Memory that consolidates, and its recall measured (issue 35, sections 2 and 3).

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-02

`memory_curated` gains `created_at` (when a memory was first kept; the rows before it
get their `updated_at`) and `times_seen` (how often the same was said again and merged
into it, 1 for the rows before it). `memory_consolidations`: per agent and session, how
far the session's lines were summarised into memory at its end (the last log line id)
and what came of it. `memory_eval_runs`: one `opencrab memory eval` run, with each
search leg's recall and latency as JSON.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from opencrab.store.types import UtcDateTime

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

STATUSES = "status IN ('done', 'failed', 'empty')"


def upgrade() -> None:
    with op.batch_alter_table("memory_curated") as batch:
        batch.add_column(sa.Column("created_at", UtcDateTime(), nullable=True))
        batch.add_column(sa.Column("times_seen", sa.Integer(), server_default="1", nullable=False))
    op.execute("UPDATE memory_curated SET created_at = updated_at")
    op.create_table(
        "memory_consolidations",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("last_log_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("memories", sa.Integer(), server_default="0", nullable=False),
        sa.Column("merged", sa.Integer(), server_default="0", nullable=False),
        sa.Column("impressions", sa.Integer(), server_default="0", nullable=False),
        sa.Column("detail_json", sa.JSON(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint(STATUSES, name=op.f("ck_memory_consolidations_status")),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_memory_consolidations_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "session_id", name=op.f("pk_memory_consolidations")),
    )
    op.create_table(
        "memory_eval_runs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("generator", sa.String(length=32), nullable=False),
        sa.Column("legs_json", sa.JSON(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_memory_eval_runs_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_eval_runs")),
    )
    op.create_index(
        op.f("ix_memory_eval_runs_agent_id_created_at"),
        "memory_eval_runs",
        ["agent_id", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_memory_eval_runs_agent_id_created_at"), table_name="memory_eval_runs")
    op.drop_table("memory_eval_runs")
    op.drop_table("memory_consolidations")
    with op.batch_alter_table("memory_curated") as batch:
        batch.drop_column("times_seen")
        batch.drop_column("created_at")
