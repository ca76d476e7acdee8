"""LLM metrics: attempt outcome, cache and reasoning tokens, cost source; seed prices.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

One llm_usage_metrics row is written per call attempt, failures included: `status` and
`error_type`/`error` say how it ended; `request_id` groups the attempts of one routed
call (fallbacks) and `attempt` numbers them. Token detail columns follow opencrab's
Usage conventions. model_pricing gets seed 001's February 2026 table (and zero-cost
rows for the local llama.cpp and embedded providers); existing rows are left alone.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from opencrab.store.types import UtcDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

PRICES = (
    ("openai", "gpt-5.2", 1.75, 14.00, 256_000),
    ("openai", "gpt-5.2-pro", 21.00, 168.00, 256_000),
    ("openai", "gpt-5-mini", 0.25, 2.00, 128_000),
    ("anthropic", "claude-opus-4.6", 5.00, 25.00, 1_000_000),
    ("anthropic", "claude-sonnet-4.5", 3.00, 15.00, 1_000_000),
    ("anthropic", "claude-haiku-4.5", 1.00, 5.00, 200_000),
    ("google", "gemini-3-pro", 2.00, 12.00, 1_000_000),
    ("google", "gemini-3-flash", 0.50, 3.00, 1_000_000),
    ("google", "gemini-2.5-flash-lite", 0.10, 0.40, 128_000),
    ("deepseek", "deepseek-v3.2", 0.25, 0.38, 128_000),
    ("ollama", "*", 0.0, 0.0, None),
    ("openrouter", "free/*", 0.0, 0.0, None),
    ("llamacpp", "*", 0.0, 0.0, None),
    ("embedded", "*", 0.0, 0.0, None),
)


def upgrade() -> None:
    with op.batch_alter_table("llm_usage_metrics", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("status", sa.String(length=16), server_default="ok", nullable=False)
        )
        batch_op.add_column(sa.Column("error_type", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("error", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("cache_read_tokens", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("cache_write_tokens", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("reasoning_tokens", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("cost_source", sa.String(length=16), server_default="pricing", nullable=False)
        )
        batch_op.add_column(sa.Column("stream", sa.Boolean(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("request_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("attempt", sa.Integer(), server_default="1", nullable=False))
        batch_op.create_index(
            batch_op.f("ix_llm_usage_metrics_request_id"), ["request_id"], unique=False
        )

    pricing = sa.table(
        "model_pricing",
        sa.column("provider", sa.String),
        sa.column("model", sa.String),
        sa.column("input_price_per_1m", sa.Float),
        sa.column("output_price_per_1m", sa.Float),
        sa.column("context_window", sa.Integer),
        sa.column("updated_at", UtcDateTime()),
    )
    conn = op.get_bind()
    existing = {(p, m) for p, m in conn.execute(sa.select(pricing.c.provider, pricing.c.model))}
    updated = datetime(2026, 2, 1, tzinfo=UTC)
    rows = [
        {
            "provider": provider,
            "model": model,
            "input_price_per_1m": price_in,
            "output_price_per_1m": price_out,
            "context_window": window,
            "updated_at": updated,
        }
        for provider, model, price_in, price_out, window in PRICES
        if (provider, model) not in existing
    ]
    if rows:
        op.bulk_insert(pricing, rows)


def downgrade() -> None:
    pricing = sa.table(
        "model_pricing", sa.column("provider", sa.String), sa.column("model", sa.String)
    )
    for provider, model, *_ in PRICES:
        op.execute(
            pricing.delete().where(pricing.c.provider == provider).where(pricing.c.model == model)
        )
    with op.batch_alter_table("llm_usage_metrics", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_usage_metrics_request_id"))
        for column in (
            "attempt",
            "request_id",
            "stream",
            "cost_source",
            "reasoning_tokens",
            "cache_write_tokens",
            "cache_read_tokens",
            "error",
            "error_type",
            "status",
        ):
            batch_op.drop_column(column)
