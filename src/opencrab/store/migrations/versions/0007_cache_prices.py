"""Prompt-cache prices: model_pricing gets cache read and cache write rates.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

Cached input is billed below the input rate (a tenth of it for the models seed 001
lists) and Anthropic bills cache writes above it, so pricing every input token at the
input rate overstated cached calls by up to ten times. A null rate keeps the old rule:
those tokens cost what other input costs. Rows still holding seed 001's February 2026
input and output prices get the rates published with them; rows someone changed are
left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# (provider, model): (input, output as seeded by 0002, cache read, cache write) $/1M
CACHE_PRICES = {
    ("openai", "gpt-5.2"): (1.75, 14.00, 0.175, None),
    ("openai", "gpt-5-mini"): (0.25, 2.00, 0.025, None),
    ("anthropic", "claude-opus-4.6"): (5.00, 25.00, 0.50, 6.25),
    ("anthropic", "claude-sonnet-4.5"): (3.00, 15.00, 0.30, 3.75),
    ("anthropic", "claude-haiku-4.5"): (1.00, 5.00, 0.10, 1.25),
    ("google", "gemini-3-pro"): (2.00, 12.00, 0.20, None),
    ("google", "gemini-3-flash"): (0.50, 3.00, 0.05, None),
    ("google", "gemini-2.5-flash-lite"): (0.10, 0.40, 0.01, None),
    ("deepseek", "deepseek-v3.2"): (0.25, 0.38, 0.025, None),
}


def upgrade() -> None:
    with op.batch_alter_table("model_pricing", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cache_read_price_per_1m", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("cache_write_price_per_1m", sa.Float(), nullable=True))
    pricing = sa.table(
        "model_pricing",
        sa.column("provider", sa.String),
        sa.column("model", sa.String),
        sa.column("input_price_per_1m", sa.Float),
        sa.column("output_price_per_1m", sa.Float),
        sa.column("cache_read_price_per_1m", sa.Float),
        sa.column("cache_write_price_per_1m", sa.Float),
    )
    for (provider, model), (price_in, price_out, read, write) in CACHE_PRICES.items():
        op.execute(
            pricing.update()
            .where(
                pricing.c.provider == provider,
                pricing.c.model == model,
                pricing.c.input_price_per_1m == price_in,
                pricing.c.output_price_per_1m == price_out,
            )
            .values(cache_read_price_per_1m=read, cache_write_price_per_1m=write)
        )


def downgrade() -> None:
    with op.batch_alter_table("model_pricing", schema=None) as batch_op:
        batch_op.drop_column("cache_write_price_per_1m")
        batch_op.drop_column("cache_read_price_per_1m")
