"""The inbox's record of items it noticed (issue 37, section 2).

Revision ID: 0035
Revises: 0030
Create Date: 2026-12-02

`inbox_items`: one row per item the inbox has noticed (a held call, a ticket's question,
an agent-mode question, a budget alert, a spend alarm), keyed `<kind>:<subject>`. The
process whose insert wins sends the item's notification and records how it went; a
budget alert or spend alarm a person dismissed keeps the time and who did it.
`inbox_secrets`: the webhook's signing secret when set through the API, encrypted.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox_items",
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=True),
        sa.Column("summary", sa.String(length=500), server_default="", nullable=False),
        sa.Column("first_seen_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("notify_status", sa.String(length=16), nullable=False),
        sa.Column("notify_owner", sa.String(length=200), nullable=True),
        sa.Column("notify_claimed_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("notified_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("notify_error", sa.String(length=500), nullable=True),
        sa.Column("dismissed_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("dismissed_by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_inbox_items")),
    )
    op.create_index(
        op.f("ix_inbox_items_first_seen_at"), "inbox_items", ["first_seen_at"], unique=False
    )
    op.create_table(
        "inbox_secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value_encrypted", sa.Text(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_inbox_secrets")),
    )


def downgrade() -> None:
    op.drop_table("inbox_secrets")
    op.drop_table("inbox_items")
