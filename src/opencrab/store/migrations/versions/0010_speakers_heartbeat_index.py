"""Who said what: messages get their speaker and an interrupted mark; heartbeat_log its index.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

A discussion's messages come from several agents (and from people posting into it), so
each message names its speaker (`speaker_id`, `speaker_name`); a reply cut short by the
user (Ctrl-C) is kept with `interrupted` set. Existing messages get their speaker from
the memory log line written with the same event (the engine wrote both in one
transaction), and an agent speaker its name. `idx_heartbeat_agent` is seed 001's index
on heartbeat_log(agent_id).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

BATCH = 1000


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("speaker_id", sa.String(200), nullable=True))
        batch_op.add_column(sa.Column("speaker_name", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("interrupted", sa.Boolean(), server_default="0", nullable=False)
        )
    op.create_index("idx_heartbeat_agent", "heartbeat_log", ["agent_id"], unique=False)
    _backfill_speakers()


def _backfill_speakers() -> None:
    """Name the speaker of every stored message that was written with a memory log line."""
    conn = op.get_bind()
    messages = sa.table(
        "messages",
        sa.column("id", sa.Integer),
        sa.column("event_id", sa.String),
        sa.column("speaker_id", sa.String),
        sa.column("speaker_name", sa.Text),
    )
    logs = sa.table(
        "memory_sessions",
        sa.column("event_id", sa.String),
        sa.column("speaker_id", sa.String),
        sa.column("log_type", sa.String),
    )
    agents = sa.table("agents", sa.column("id", sa.String), sa.column("name", sa.String))
    names = {str(r.id): r.name for r in conn.execute(sa.select(agents.c.id, agents.c.name))}
    last = 0
    while True:
        rows = conn.execute(
            sa.select(messages.c.id, logs.c.speaker_id)
            .join(logs, logs.c.event_id == messages.c.event_id)
            .where(
                messages.c.id > last,
                messages.c.speaker_id.is_(None),
                logs.c.log_type == "speech",
                logs.c.speaker_id.is_not(None),
            )
            .order_by(messages.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        for row in rows:
            conn.execute(
                messages.update()
                .where(messages.c.id == row.id)
                .values(speaker_id=row.speaker_id, speaker_name=names.get(str(row.speaker_id)))
            )
        last = rows[-1].id


def downgrade() -> None:
    op.drop_index("idx_heartbeat_agent", table_name="heartbeat_log")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("interrupted")
        batch_op.drop_column("speaker_name")
        batch_op.drop_column("speaker_id")
