"""SQLite specifics: connection pragmas and the FTS5 index over memory session logs."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

FTS_TABLE = "memory_sessions_fts"
"""The FTS5 index over `memory_sessions.content` (trigram: works for CJK and English)."""


def is_fts_object(name: str) -> bool:
    """True for the FTS5 table and its shadow tables, which no metadata declares."""
    return name == FTS_TABLE or name.startswith(FTS_TABLE + "_")


def configure(engine: Engine, *, busy_timeout_ms: int) -> None:
    """Per-connection pragmas, and explicit BEGIN so writers can take the lock up front.

    pysqlite's implicit transactions are switched off; a connection with the execution
    option `write=True` starts with BEGIN IMMEDIATE, so two writers never deadlock on a
    read-to-write upgrade and wait for each other up to the busy timeout instead.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
