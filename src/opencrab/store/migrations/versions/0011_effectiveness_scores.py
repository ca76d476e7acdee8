"""Skill effectiveness kept as it goes: skills get the scores of their recent turns.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23

A skill's effectiveness is the mean score of the last 50 turns that used it. Keeping
those scores on the skill row (a JSON list, newest last) lets a turn fold its own score
in with one small write, instead of rereading the agent's recent action log every turn.
Existing skills start with an empty list; their stored effectiveness stays as it is
until a turn uses them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("effectiveness_scores", sa.JSON(), nullable=False, server_default="[]")
        )


def downgrade() -> None:
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.drop_column("effectiveness_scores")
