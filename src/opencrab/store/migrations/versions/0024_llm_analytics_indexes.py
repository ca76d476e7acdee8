"""The cost dashboard's filtered reads stay fast: llm_usage_metrics(agent_id, timestamp)
and llm_usage_metrics(purpose, timestamp).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-24

Every figure of the Costs page (store/repositories/llm_analytics.py) reads the calls of a
period; filtered by agent, or by purpose (the live / imported source is purpose
`import` or not), the rows of that agent or purpose in the period are read along one of
these indexes instead of all of the agent's (purpose's) calls or all of the period's.
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_llm_usage_metrics_agent_id_timestamp",
        "llm_usage_metrics",
        ["agent_id", "timestamp"],
        unique=False,
    )
    op.create_index(
        "ix_llm_usage_metrics_purpose_timestamp",
        "llm_usage_metrics",
        ["purpose", "timestamp"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_llm_usage_metrics_purpose_timestamp", table_name="llm_usage_metrics")
    op.drop_index("ix_llm_usage_metrics_agent_id_timestamp", table_name="llm_usage_metrics")
