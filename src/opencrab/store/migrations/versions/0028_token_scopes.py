"""Token scopes and the dashboard's sign-in sessions (issue 31).

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-25

`api_tokens` gains `scope` (read, chat, operate or admin, each including the ones before
it); the tokens made before it get `admin`, what they could do until now, so they keep
working. `login_sessions`: one row per browser sign-in, the SHA-256 of the id the cookie
carries (never the token), an expiry, and when it ended (signed out, or its token revoked).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from opencrab.store.types import UtcDateTime

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

SCOPES = "scope IN ('read', 'chat', 'operate', 'admin')"


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(
            sa.Column("scope", sa.String(length=16), server_default="admin", nullable=False)
        )
        batch.create_check_constraint(op.f("ck_api_tokens_scope"), SCOPES)
    op.create_table(
        "login_sessions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("token_id", sa.String(length=36), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.Column("ended_at", UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name=op.f("fk_login_sessions_token_id_api_tokens"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_sessions")),
        sa.UniqueConstraint("session_hash", name=op.f("uq_login_sessions_session_hash")),
    )
    op.create_index(
        op.f("ix_login_sessions_token_id"), "login_sessions", ["token_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_login_sessions_token_id"), table_name="login_sessions")
    op.drop_table("login_sessions")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_constraint(op.f("ck_api_tokens_scope"), type_="check")
        batch.drop_column("scope")
