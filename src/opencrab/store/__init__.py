"""Storage: SQLAlchemy Core tables, Alembic migrations and the Database handle."""

from __future__ import annotations

from opencrab.store.database import Database

__all__ = ["Database"]
