"""Tool calls waiting for a person's approval (issue 20, section 3).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25

One row per call an agent made that its approval policy held back
(opencrab.core.approvals): the call as the model made it, its session, trace and
tool_call event, and the person's decision once made (`approved` or `denied`, when, by
whom, why) with the tool_result event the decision wrote.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pending_approvals",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("trace_id", sa.String(length=36), nullable=False),
        sa.Column("tool_name", sa.String(length=100), nullable=False),
        sa.Column("arguments_json", sa.JSON(), nullable=False),
        sa.Column("call_id", sa.String(length=200), nullable=False),
        sa.Column("call_event_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=16), server_default="pending", nullable=False),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("decided_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("decided_by", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("result_event_id", sa.String(length=36), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'denied')",
            name=op.f("ck_pending_approvals_status"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_pending_approvals_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_pending_approvals_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_approvals")),
    )
    for column in ("session_id", "status"):
        op.create_index(
            op.f(f"ix_pending_approvals_{column}"), "pending_approvals", [column], unique=False
        )


def downgrade() -> None:
    op.drop_table("pending_approvals")
