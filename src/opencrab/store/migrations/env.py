"""Alembic environment: migrations always run on a connection handed in by opencrab."""

from __future__ import annotations

from typing import Any

from alembic import context

from opencrab.store.dialects.postgresql import is_search_object, is_vector_column
from opencrab.store.dialects.sqlite import is_fts_object
from opencrab.store.tables import metadata


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave dialect-specific objects (FTS5 tables, the trigram and HNSW indexes, the
    pgvector column) out of autogenerate comparisons."""
    if name is None:
        return True
    if type_ == "table":
        return not is_fts_object(name)
    if type_ == "column":
        return not is_vector_column(obj, name)
    return not (type_ == "index" and is_search_object(name))


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `opencrab db upgrade`, not the alembic CLI")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,
    include_object=include_object,
)
with context.begin_transaction():
    context.run_migrations()
