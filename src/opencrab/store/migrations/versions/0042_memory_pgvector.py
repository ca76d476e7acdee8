"""Memory vectors in PostgreSQL with pgvector, when the server has it (issue 35).

Revision ID: 0042
Revises: 0041
Create Date: 2026-12-02

On PostgreSQL whose server has the `vector` extension (pgvector) and lets this role
create it: the extension is created, `memory_embeddings` gains the column `embedding`
of type `vector` (no fixed dimension: embedders differ), filled from the float32 bytes
already stored, and one HNSW cosine index per dimension in use
(`ix_memory_embeddings_hnsw_<n>`, on `embedding::vector(n)` over `WHERE dim = n`). The
vector leg of memory search then ranks in the database
(store/repositories/memory_vectors.py: `nearest`).

Without pgvector (or without the right to create it) nothing changes: the vector leg
keeps searching in process, a warning says why, and every later start (and `opencrab db
upgrade`) tries again (memory_vectors.use_pgvector_if_installed). SQLite: nothing (its
vectors are searched in process).
"""

from __future__ import annotations

import logging

from alembic import op

from opencrab.store.repositories.memory_vectors import disable_pgvector, enable_pgvector

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None

log = logging.getLogger("opencrab.store.migrations")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    why_not = enable_pgvector(bind)
    if why_not is not None:
        log.warning("memory vectors stay in process (numpy): %s", why_not)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        disable_pgvector(bind)
