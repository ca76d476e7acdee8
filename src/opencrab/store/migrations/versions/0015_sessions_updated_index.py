"""Sessions listed newest first stay fast: an index on sessions(updated_at, id).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24

`GET /api/sessions` and the dashboard's session list order by `updated_at` (newest
first, then id) and page with LIMIT/OFFSET; with this index a page deep into 10,000
sessions is read along the index instead of sorting every session.
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sessions_updated_at_id", "sessions", ["updated_at", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_sessions_updated_at_id", table_name="sessions")
