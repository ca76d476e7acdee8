"""Memory search's vector leg: one vector per session log line and embedder (issue 35).

Revision ID: 0032
Revises: 0030
Create Date: 2026-12-02

`memory_embeddings` keeps a float32 vector per (log line, embedder), written off the
turn's path by the memory indexer (core/memory_index.py) and searched in process
(core/memory_vectors.py) on SQLite and PostgreSQL alike; `memory_embedders` names the
embedder each agent's memory is indexed with now and the last pass's error. Lines written
before this revision have no vector: the indexer backfills them. No database extension
is needed here (0042 adds a pgvector column on PostgreSQL servers that have pgvector).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import opencrab.store.types

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_embeddings",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("log_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_memory_embeddings_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["log_id"],
            ["memory_sessions.id"],
            name=op.f("fk_memory_embeddings_log_id_memory_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_memory_embeddings")),
        sa.UniqueConstraint("log_id", "model", name=op.f("uq_memory_embeddings_log_id_model")),
    )
    op.create_index(
        op.f("ix_memory_embeddings_agent_id_model_seq"),
        "memory_embeddings",
        ["agent_id", "model", "seq"],
        unique=False,
    )
    op.create_table(
        "memory_embedders",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_memory_embedders_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_memory_embedders")),
    )


def downgrade() -> None:
    op.drop_table("memory_embedders")
    op.drop_index(op.f("ix_memory_embeddings_agent_id_model_seq"), table_name="memory_embeddings")
    op.drop_table("memory_embeddings")
