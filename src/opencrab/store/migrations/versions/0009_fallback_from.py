"""LLM metrics say what a fallback replaced: llm_usage_metrics gets fallback_from.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30

A call that falls back writes one row per attempt; `attempt` numbers them and
`fallback_from` names the `provider/model` whose failure led to this attempt (null on
the first attempt), so a reply from a fallback model is visible in its own row.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_usage_metrics", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fallback_from", sa.String(length=265), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("llm_usage_metrics", schema=None) as batch_op:
        batch_op.drop_column("fallback_from")
