"""Alembic migration scripts (one revision per schema change)."""
