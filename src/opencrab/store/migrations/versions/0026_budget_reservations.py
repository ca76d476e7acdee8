"""Budget reservations (issue 31, point 3).

Revision ID: 0026
Revises: 0025
Create Date: 2027-01-12

`budget_reservations`: one row per LLM call attempt running under a cap, holding its
estimated cost against the agent's, the ticket's and the fleet's caps until the call's
`llm_usage_metrics` row replaces it (same id, same transaction). A row names the process
that took it and expires, so a crashed process's reservations lapse.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "budget_reservations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("ticket_id", sa.String(length=64), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("expires_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_reservations")),
    )
    for column in ("agent_id", "ticket_id", "expires_at"):
        op.create_index(
            op.f(f"ix_budget_reservations_{column}"),
            "budget_reservations",
            [column],
            unique=False,
        )


def downgrade() -> None:
    op.drop_table("budget_reservations")
