"""Schedules and their runs (issue 37, section 1).

Revision ID: 0034
Revises: 0030
Create Date: 2026-12-02

`schedules`: an agent's schedule (a cron expression in a time zone, a fixed interval or
one time), what each run does (`action_json`), what a window missed while no process ran
becomes (`catch_up`: once or skip), the latest slot claimed and when it was last resumed
(the slots before are not run). `schedule_runs`: one row
per slot claimed, unique per (schedule, slot), so a slot runs once however many
processes see it due; each row says which process ran it, when, how it ended, what it
cost and produced.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("cron", sa.String(length=200), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("every_secs", sa.Integer(), nullable=True),
        sa.Column("at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("anchor_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("action_json", sa.JSON(), nullable=False),
        sa.Column("catch_up", sa.String(length=8), server_default="once", nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("last_slot", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("resumed_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("created_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.CheckConstraint("kind IN ('cron', 'every', 'at')", name=op.f("ck_schedules_kind")),
        sa.CheckConstraint("catch_up IN ('once', 'skip')", name=op.f("ck_schedules_catch_up")),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_schedules_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    op.create_index(op.f("ix_schedules_updated_at"), "schedules", ["updated_at"], unique=False)
    op.create_table(
        "schedule_runs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("schedule_id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("slot", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("trigger", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("process", sa.String(length=200), nullable=False),
        sa.Column("started_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("ended_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.Column("cost_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=True),
        sa.Column("ticket_id", sa.String(length=36), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("acknowledged_at", opencrab.store.types.UtcDateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'succeeded', 'failed', 'skipped', 'abandoned')",
            name=op.f("ck_schedule_runs_status"),
        ),
        sa.CheckConstraint(
            "trigger IN ('slot', 'late', 'manual')", name=op.f("ck_schedule_runs_trigger")
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_schedule_runs_schedule_id_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_runs")),
        sa.UniqueConstraint("schedule_id", "slot", name=op.f("uq_schedule_runs_schedule_id_slot")),
    )
    for columns in (["agent_id"], ["status"], ["schedule_id", "started_at"]):
        op.create_index(
            op.f(f"ix_schedule_runs_{'_'.join(columns)}"), "schedule_runs", columns, unique=False
        )


def downgrade() -> None:
    op.drop_table("schedule_runs")
    op.drop_table("schedules")
