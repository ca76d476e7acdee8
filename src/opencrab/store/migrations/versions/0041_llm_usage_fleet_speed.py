"""The fleet's daily LLM rollup `llm_usage_fleet_daily`, and the successful calls'
latency and TTFT as per-day histograms `llm_usage_speed`.

Revision ID: 0041
Revises: 0035
Create Date: 2026-12-02

`llm_usage_fleet_daily`: llm_usage_daily's rows summed over the agents (a fleet-wide
figure reads one row per day × provider × model × purpose × task type × status instead
of one per agent too), back-filled from llm_usage_daily and written with it.

`llm_usage_agent_daily`: each agent's calls and cost per UTC day and task type, what the
budget checks and the Budgets page sum (llm_usage_daily's rows of an agent and day
summed over the providers, models, purposes and statuses), likewise.

`llm_usage_speed`: one row per UTC day × provider × model × source (live | imported) × metric (latency |
ttft) × bucket: how many successful calls' values fell in the bucket, and the smallest
and largest of them. Buckets are the values themselves below 128 ms and log-spaced
(ratio 1.03) above, so a percentile read from them is within 2 % of the exact
nearest-rank value (store/repositories/metrics_speed.py: speed_bucket, PERCENTILE_ERROR). The
metrics repository adds to it in the transaction of every insert; the Costs page's
speed chart and the LLM monitoring read it instead of ranking the calls. The stored
calls are counted into it here, one day at a time.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from opencrab.store.repositories.metrics_speed import rebuild_speed

revision = "0041"
down_revision = "0039"
branch_labels = None
depends_on = None


KEYS = ("day", "provider", "model", "purpose", "task_type", "status")
SUMS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_usd",
    "quality_sum",
    "quality_count",
    "latency_ms_sum",
    "ttft_ms_sum",
    "ttft_count",
)


def upgrade() -> None:
    big = sa.BigInteger()
    op.create_table(
        "llm_usage_fleet_daily",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("task_type", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        *(
            sa.Column(
                name, sa.Float() if name in ("cost_usd", "quality_sum") else big, nullable=False
            )
            for name in SUMS
        ),
        sa.PrimaryKeyConstraint(*KEYS, name=op.f("pk_llm_usage_fleet_daily")),
        sqlite_with_rowid=False,
    )
    keys, sums = ", ".join(KEYS), ", ".join(SUMS)
    op.execute(
        f"INSERT INTO llm_usage_fleet_daily ({keys}, {sums}) SELECT {keys}, "
        + ", ".join(f"SUM({name})" for name in SUMS)
        + f" FROM llm_usage_daily GROUP BY {keys}"
    )
    op.create_table(
        "llm_usage_speed",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("metric", sa.String(length=8), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("calls", big, nullable=False),
        sa.Column("min_ms", big, nullable=False),
        sa.Column("max_ms", big, nullable=False),
        sa.PrimaryKeyConstraint(
            "day",
            "provider",
            "model",
            "source",
            "metric",
            "bucket",
            name=op.f("pk_llm_usage_speed"),
        ),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "llm_usage_agent_daily",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("task_type", sa.String(length=64), nullable=False),
        sa.Column("calls", big, nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(
            "day", "agent_id", "task_type", name=op.f("pk_llm_usage_agent_daily")
        ),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO llm_usage_agent_daily (day, agent_id, task_type, calls, cost_usd) "
        "SELECT day, agent_id, task_type, SUM(calls), SUM(cost_usd) FROM llm_usage_daily "
        "GROUP BY day, agent_id, task_type"
    )
    rebuild_speed(op.get_bind())


def downgrade() -> None:
    op.drop_table("llm_usage_speed")
    op.drop_table("llm_usage_agent_daily")
    op.drop_table("llm_usage_fleet_daily")
