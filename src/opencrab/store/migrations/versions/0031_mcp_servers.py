"""MCP servers added in the dashboard (issue 34, section 1).

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-02

One row per MCP server added on the dashboard's MCP page: its settings but the secrets
(JSON), the secrets (a bearer token, secret header and environment values) as one
Fernet token, what the page shows of them (their last four characters), a revision that
grows with every edit (each process restarts a server whose revision moved), and who
changed it last. `[mcp.servers.<name>]` tables of the config are not stored here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("config_json", sa.JSON(), nullable=False),
        sa.Column("secrets_encrypted", sa.Text(), nullable=True),
        sa.Column("secrets_shown_json", sa.JSON(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_mcp_servers")),
    )


def downgrade() -> None:
    op.drop_table("mcp_servers")
