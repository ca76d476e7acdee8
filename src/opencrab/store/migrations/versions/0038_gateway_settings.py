"""Chat-platform gateways' settings made on the dashboard (issue 38).

Revision ID: 0038
Revises: 0035
Create Date: 2026-12-02

`gateway_settings`: one row per gateway whose settings were saved on the dashboard's
Gateways page (or `PUT /api/gateways/{name}`): its table's keys but the secrets (JSON),
the secrets as one Fernet token (the key of the LLM API keys), what the page shows of
them (their last four characters), who saved it and when. The config file's
`[gateway.<name>]` keys are not stored here; they win over these.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0038"
down_revision = "0036"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_settings",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("settings_json", sa.JSON(), nullable=False),
        sa.Column("secrets_encrypted", sa.Text(), nullable=True),
        sa.Column("secrets_shown_json", sa.JSON(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_gateway_settings")),
    )


def downgrade() -> None:
    op.drop_table("gateway_settings")
