"""Budgets and alerts (issue 21, section 3).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-24

`budget_caps`: the fleet-wide daily and monthly caps set at runtime (REST), which take
the place of `[budgets]` in the configuration once set. `budget_alerts`: one row per cap,
period and threshold (80 %, 100 %) the spend reached, recorded once.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "budget_caps",
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("daily_usd", sa.Float(), nullable=True),
        sa.Column("monthly_usd", sa.Float(), nullable=True),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("scope", name=op.f("pk_budget_caps")),
    )
    op.create_table(
        "budget_alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("cap", sa.String(length=16), nullable=False),
        sa.Column("period", sa.String(length=16), nullable=False),
        sa.Column("threshold", sa.Integer(), nullable=False),
        sa.Column("cap_usd", sa.Float(), nullable=False),
        sa.Column("spent_usd", sa.Float(), nullable=False),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_alerts")),
        sa.UniqueConstraint(
            "scope",
            "cap",
            "period",
            "threshold",
            name=op.f("uq_budget_alerts_scope_cap_period_threshold"),
        ),
    )
    op.create_index(
        op.f("ix_budget_alerts_created_at"), "budget_alerts", ["created_at"], unique=False
    )


def downgrade() -> None:
    op.drop_table("budget_alerts")
    op.drop_table("budget_caps")
