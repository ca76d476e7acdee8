"""Agent language: agents get a `language` column (en, ja or zh).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

The prompts and standard skills an agent sees are in its language. NULL, what every
existing agent gets, follows the server's `[agent] language` (en by default; set it to
"ja" to keep seed 001's Japanese texts).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("language", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("language")
