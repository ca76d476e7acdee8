"""The daily rollup of llm_usage_metrics: `llm_usage_daily`, backfilled from the stored calls.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-24

One row per UTC day × agent × provider × model × purpose × task type ("" for none) ×
status with the calls' count and sums (tokens, cache, cost, quality, latency, TTFT).
The metrics repository keeps it in step with `llm_usage_metrics` in the transaction of
every insert, re-pricing and rating; the Costs page and the budget checks read it for
whole UTC days instead of summing the calls again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

KEYS = ("day", "agent_id", "provider", "model", "purpose", "task_type", "status")
BACKFILL = """
INSERT INTO llm_usage_daily (day, agent_id, provider, model, purpose, task_type, status,
    calls, input_tokens, output_tokens, total_tokens, cache_read_tokens, cache_write_tokens,
    reasoning_tokens, cost_usd, quality_sum, quality_count, latency_ms_sum, ttft_ms_sum,
    ttft_count)
SELECT {day} AS d, agent_id, provider, model, purpose, COALESCE(task_type, '') AS t, status,
    COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(total_tokens),
    SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(reasoning_tokens),
    SUM(estimated_cost_usd), COALESCE(SUM(quality_score), 0.0), COUNT(quality_score),
    SUM(latency_ms), COALESCE(SUM(time_to_first_token_ms), 0), COUNT(time_to_first_token_ms)
FROM llm_usage_metrics
GROUP BY d, agent_id, provider, model, purpose, t, status
"""
DAY = {
    "sqlite": "substr(timestamp, 1, 10)",
    "postgresql": "to_char(timezone('UTC', timestamp), 'YYYY-MM-DD')",
}


def upgrade() -> None:
    big = sa.BigInteger()
    op.create_table(
        "llm_usage_daily",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("task_type", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("calls", big, nullable=False),
        sa.Column("input_tokens", big, nullable=False),
        sa.Column("output_tokens", big, nullable=False),
        sa.Column("total_tokens", big, nullable=False),
        sa.Column("cache_read_tokens", big, nullable=False),
        sa.Column("cache_write_tokens", big, nullable=False),
        sa.Column("reasoning_tokens", big, nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("quality_sum", sa.Float(), nullable=False),
        sa.Column("quality_count", big, nullable=False),
        sa.Column("latency_ms_sum", big, nullable=False),
        sa.Column("ttft_ms_sum", big, nullable=False),
        sa.Column("ttft_count", big, nullable=False),
        sa.PrimaryKeyConstraint(*KEYS, name=op.f("pk_llm_usage_daily")),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_llm_usage_daily_agent_id_day", "llm_usage_daily", ["agent_id", "day"], unique=False
    )
    bind = op.get_bind()
    op.execute(sa.text(BACKFILL.format(day=DAY[bind.dialect.name])))


def downgrade() -> None:
    op.drop_index("ix_llm_usage_daily_agent_id_day", table_name="llm_usage_daily")
    op.drop_table("llm_usage_daily")
