"""The agent a chat conversation chose (issue 38: Telegram's `/use <agent>`).

Revision ID: 0039
Revises: 0035
Create Date: 2026-12-02

`chat_agents`: one row per (gateway, conversation) whose people picked the agent that
answers there (`/use aki` in a Telegram chat), so the choice survives a restart. Deleting
the agent deletes the row: the conversation goes back to the gateway's own agent.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_agents",
        sa.Column("gateway", sa.String(length=100), nullable=False),
        sa.Column("conversation", sa.String(length=500), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("set_by", sa.String(length=200), server_default="", nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_chat_agents_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("gateway", "conversation", name=op.f("pk_chat_agents")),
    )


def downgrade() -> None:
    op.drop_table("chat_agents")
