"""Skill version history: every version of a skill's text is kept.

Revision ID: 0014
Revises: 0011
Create Date: 2026-11-24

A skill gets a new version when it is learned again under its name, edited, or its
standard file changes; until now only the newest text was kept. `skill_versions` keeps
each version's name, description, situation, guidance, actions and source, and what
made it (created, refined, edited, file). Existing skills start their history with
their current text, marked `recorded` (how it came about was not kept), dated by the
row's last change.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0014"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "skill_versions",
        sa.Column("skill_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("situation_pattern", sa.Text(), nullable=False),
        sa.Column("guidance", sa.Text(), nullable=False),
        sa.Column("actions_json", sa.JSON(), nullable=False),
        sa.Column("source_type", sa.String(length=32), nullable=False),
        sa.Column("source_context", sa.Text(), nullable=True),
        sa.Column("change", sa.String(length=16), nullable=False),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "change IN ('created', 'refined', 'edited', 'file', 'recorded')",
            name=op.f("ck_skill_versions_change"),
        ),
        sa.ForeignKeyConstraint(
            ["skill_id"],
            ["skills.id"],
            name=op.f("fk_skill_versions_skill_id_skills"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("skill_id", "version", name=op.f("pk_skill_versions")),
    )
    op.execute(
        "INSERT INTO skill_versions (skill_id, version, name, description, situation_pattern, "
        "guidance, actions_json, source_type, source_context, change, created_at) "
        "SELECT id, version, name, description, situation_pattern, guidance, actions_json, "
        "source_type, source_context, 'recorded', updated_at FROM skills"
    )


def downgrade() -> None:
    op.drop_table("skill_versions")
