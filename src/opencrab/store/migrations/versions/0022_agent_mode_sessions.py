"""Agent-mode sessions index (issue 22, seed 004).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26

One row per agent-mode session file (`~/.gwt/sessions/{id}.json` by default): its
repository, status, request, task counts by status and times, for listing and the
dashboard. The file is the source of truth; the row is rewritten on every save and can
be rebuilt from the files (`opencrab.agentmode.service.reindex`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

TASK_COUNTS = ("total", "pending", "ready", "running", "completed", "failed", "cancelled")


def upgrade() -> None:
    op.create_table(
        "agent_mode_sessions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("repository_path", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("file_path", sa.Text(), nullable=False),
        *(
            sa.Column(f"tasks_{name}", sa.Integer(), server_default="0", nullable=False)
            for name in TASK_COUNTS
        ),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "status IN ('Active', 'Paused', 'Completed', 'Failed')",
            name=op.f("ck_agent_mode_sessions_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_mode_sessions")),
    )
    for column in ("status", "updated_at"):
        op.create_index(
            op.f(f"ix_agent_mode_sessions_{column}"), "agent_mode_sessions", [column], unique=False
        )


def downgrade() -> None:
    op.drop_table("agent_mode_sessions")
