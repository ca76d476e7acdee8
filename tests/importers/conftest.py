"""Fixtures of the importer tests: a migrated store, on SQLite and on PostgreSQL (`any_db`),
and an agent in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.store import Database


@pytest.fixture
def db(any_db: Database) -> Database:
    """Every importer test runs on both databases."""
    return any_db


@pytest.fixture
def agent_id(db: Database, tmp_path: Path) -> str:
    settings = load_settings(None, overrides={"data_dir": str(tmp_path)})
    return AgentStore(db, settings).create(AgentCreate(name="coder", prompt="You code.")).id
