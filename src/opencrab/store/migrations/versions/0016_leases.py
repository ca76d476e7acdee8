"""Leases: work that must run once across processes is claimed through a lease row.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

A row names what is leased (`turn:<session id>`, `heartbeat:<agent id>`), the process
that holds it and when the lease expires; the holder renews it while the work runs, and
a dead holder's lease expires so another process may take the work (store.leases).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("acquired_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("renewed_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("expires_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_leases")),
    )
    op.create_index(op.f("ix_leases_owner"), "leases", ["owner"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_leases_owner"), table_name="leases")
    op.drop_table("leases")
