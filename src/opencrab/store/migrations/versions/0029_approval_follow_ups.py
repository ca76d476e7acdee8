"""The turn that continues a session after a decision, kept in the database (issue 32).

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-01

`pending_approvals` gains the follow-up of a decision (core/approval_followups.py): the
decision on a chat's or a discussion's last waiting call sets `follow_up` to `pending` in
its own transaction, and names itself in `answered_by` of every decision of the session
the follow-up answers; whichever process claims it runs the turn and sets `done` (or
`dropped`: the session ended meanwhile) with the turn's closing steps in
`follow_up_json` and when in `followed_up_at`. The decisions made before it have none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from opencrab.store.types import UtcDateTime

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

STATUSES = "follow_up IN ('pending', 'done', 'dropped')"


def upgrade() -> None:
    with op.batch_alter_table("pending_approvals") as batch:
        batch.add_column(sa.Column("follow_up", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("answered_by", sa.String(length=36), nullable=True))
        batch.add_column(sa.Column("follow_up_json", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("followed_up_at", UtcDateTime(), nullable=True))
        batch.create_check_constraint(op.f("ck_pending_approvals_follow_up"), STATUSES)
    op.create_index(
        op.f("ix_pending_approvals_follow_up"), "pending_approvals", ["follow_up"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_pending_approvals_follow_up"), table_name="pending_approvals")
    with op.batch_alter_table("pending_approvals") as batch:
        batch.drop_constraint(op.f("ck_pending_approvals_follow_up"), type_="check")
        for column in ("followed_up_at", "follow_up_json", "answered_by", "follow_up"):
            batch.drop_column(column)
