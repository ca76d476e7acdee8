"""Agent tool settings: which outward-reaching seed tools an agent may use.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24

One row per agent that has any: `settings_json` says whether execute_command,
http_request and fetch_webpage are switched on (opencrab.actions.tool_settings). An agent
without a row has all three off.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_tool_settings",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("settings_json", sa.JSON(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_tool_settings_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_agent_tool_settings")),
    )


def downgrade() -> None:
    op.drop_table("agent_tool_settings")
