"""Searching imported transcripts (issue 21, section 5).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-24

`import_texts`: the text of every imported user and assistant message, indexed for
full-text search (SQLite: the FTS5 trigram table `import_texts_fts`, kept in step by
triggers; PostgreSQL: a pg_trgm GIN index). `import_sessions` gains `project` (the
working directory its header names, filled here for the sessions already imported) and
`texts_indexed_lines` (0 for them: their texts are indexed on the first search,
`opencrab.importers.search.catch_up`).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

import opencrab.store.types
from opencrab.store.dialects import postgresql, sqlite

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("import_sessions") as batch:
        batch.add_column(sa.Column("project", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("texts_indexed_lines", sa.Integer(), server_default="0", nullable=False)
        )
    op.create_table(
        "import_texts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("timestamp", opencrab.store.types.UtcDateTime(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["import_sessions.id"],
            name=op.f("fk_import_texts_session_id_import_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_import_texts")),
        sa.UniqueConstraint(
            "session_id", "line", "part", name=op.f("uq_import_texts_session_id_line_part")
        ),
    )
    dialect = op.get_bind().dialect.name
    statements: tuple[str, ...] = sqlite.IMPORT_SEARCH_CREATE if dialect == "sqlite" else ()
    if dialect == "postgresql":
        statements = postgresql.IMPORT_SEARCH_CREATE
    for statement in statements:
        op.execute(statement)
    _fill_projects()


def _fill_projects() -> None:
    """`project` of the sessions imported before: the `cwd` their header names."""
    bind = op.get_bind()
    sessions = sa.table(
        "import_sessions",
        sa.column("id", sa.String),
        sa.column("header_json", sa.JSON),
        sa.column("project", sa.Text),
    )
    rows = bind.execute(sa.select(sessions.c.id, sessions.c.header_json)).all()
    for session_id, header in rows:
        project = _cwd(header)
        if project is not None:
            bind.execute(
                sessions.update().where(sessions.c.id == session_id).values(project=project)
            )


def _cwd(header: Any) -> str | None:
    cwd = header.get("cwd") if isinstance(header, dict) else None
    return cwd if isinstance(cwd, str) and cwd else None


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    statements: tuple[str, ...] = sqlite.IMPORT_SEARCH_DROP if dialect == "sqlite" else ()
    if dialect == "postgresql":
        statements = postgresql.IMPORT_SEARCH_DROP
    for statement in statements:
        op.execute(statement)
    op.drop_table("import_texts")
    with op.batch_alter_table("import_sessions") as batch:
        batch.drop_column("texts_indexed_lines")
        batch.drop_column("project")
