"""A2A tasks backed by tickets (issue 36, section 1).

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-02

`a2a_tasks`: one row per ticket started over A2A; the task's id is the ticket's and its
state is the ticket's. The row keeps what the ticket has no place for: the caller's
contextId and who canceled the task over A2A (the ticket is then `failed`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "a2a_tasks",
        sa.Column("ticket_id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("context_id", sa.String(length=200), nullable=False),
        sa.Column("canceled_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_a2a_tasks_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["ticket_id"],
            ["tickets.id"],
            name=op.f("fk_a2a_tasks_ticket_id_tickets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ticket_id", name=op.f("pk_a2a_tasks")),
    )
    op.create_index(op.f("ix_a2a_tasks_context_id"), "a2a_tasks", ["context_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_a2a_tasks_context_id"), table_name="a2a_tasks")
    op.drop_table("a2a_tasks")
