"""Skills: version, the actions a skill offers, one skill per name per agent.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22

Seed 001's `Skill` has `version` and `actions` (the action names its guidance teaches);
the seed's table has neither, so they are added here. Acquiring a skill under a name
the agent already has refines that skill (a new version) instead of adding a twin, so
(agent_id, name) becomes unique.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(
            sa.Column("actions_json", sa.JSON(), server_default="[]", nullable=False)
        )
        batch_op.create_unique_constraint("uq_skills_agent_id_name", ["agent_id", "name"])


def downgrade() -> None:
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.drop_constraint("uq_skills_agent_id_name", type_="unique")
        batch_op.drop_column("actions_json")
        batch_op.drop_column("version")
