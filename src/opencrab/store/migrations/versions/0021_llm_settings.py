"""LLM settings made in the dashboard, with their audit trail (issue 21, section 4).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-24

Provider switches, API keys (Fernet-encrypted, with their last four characters for
display) and base URLs; alias edits (a removed packaged alias is a `removed` row); the
fallback chain; and one audit row per change (who, what, when — never a secret).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "llm_provider_settings",
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=True),
        sa.Column("api_key_encrypted", sa.Text(), nullable=True),
        sa.Column("api_key_last4", sa.String(length=4), nullable=True),
        sa.Column("base_url", sa.String(length=2000), nullable=True),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("provider", name=op.f("pk_llm_provider_settings")),
    )
    op.create_table(
        "llm_alias_settings",
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("removed", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("alias", name=op.f("pk_llm_alias_settings")),
    )
    op.create_table(
        "llm_chain_settings",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("chain_json", sa.JSON(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_chain_settings")),
    )
    op.create_table(
        "llm_settings_audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_settings_audit")),
    )
    op.create_index(op.f("ix_llm_settings_audit_at"), "llm_settings_audit", ["at"], unique=False)


def downgrade() -> None:
    op.drop_table("llm_settings_audit")
    op.drop_table("llm_chain_settings")
    op.drop_table("llm_alias_settings")
    op.drop_table("llm_provider_settings")
