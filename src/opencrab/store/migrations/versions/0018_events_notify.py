"""Live events across processes: on PostgreSQL, inserting events notifies listeners.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-24

A statement-level trigger on `events` runs `pg_notify('opencrab_events', '')`, which
PostgreSQL delivers when the inserting transaction commits: every server's live event
hub re-reads the table then, whichever process (or importer) wrote the rows. SQLite has
nothing to add (its readers poll).
"""

from __future__ import annotations

from alembic import op

from opencrab.store.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in postgresql.LIVE_CREATE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in postgresql.LIVE_DROP:
            op.execute(statement)
