"""The database handle: one SQLAlchemy engine, read and write transactions, migrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from opencrab.errors import StoreError
from opencrab.store.dialects import sqlite as sqlite_dialect


class Database:
    """A store reachable by SQLAlchemy URL; SQLite files get WAL and a busy timeout.

    Example:
        db = Database("sqlite:///data/opencrab.db")
        db.upgrade()
        with db.write() as conn:
            conn.execute(tables.agents.insert(), {...})
    """

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000) -> None:
        self.url = make_url(url)
        self._reading: ContextVar[Connection | None] = ContextVar(
            f"opencrab-read-{id(self)}", default=None
        )
        if self.url.get_backend_name() == "sqlite":
            database = self.url.database or ""
            if database and database != ":memory:":
                path = Path(database)
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(
                        f"cannot create the data directory {path.parent}: {exc}"
                    ) from exc
            self.engine: Engine = sa.create_engine(
                self.url, connect_args={"timeout": busy_timeout_ms / 1000}
            )
            sqlite_dialect.configure(self.engine, busy_timeout_ms=busy_timeout_ms)
        else:
            self.engine = sa.create_engine(self.url, pool_pre_ping=True)

    @property
    def dialect(self) -> str:
        """The backend name, e.g. "sqlite" or "postgresql"."""
        return self.engine.dialect.name

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a read transaction (a consistent snapshot under WAL).

        Nested inside another `read()` of the same task it reuses the outer
        connection and snapshot, so code that makes many small reads (building an
        agent's context) can wrap them in one transaction without passing it around.
        """
        outer = self._reading.get()
        if outer is not None:
            yield outer
            return
        with self.engine.connect() as conn, conn.begin():
            token = self._reading.set(conn)
            try:
                yield conn
            finally:
                self._reading.reset(token)

    def reading(self) -> bool:
        """True inside a `read()` of this task (its snapshot is fixed)."""
        return self._reading.get() is not None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection in a write transaction, committed on success, rolled back on error."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(write=True)
            with conn.begin():
                yield conn

    def upgrade(self, revision: str = "head") -> None:
        """Apply migrations up to `revision`."""
        from opencrab.store import migrate

        migrate.upgrade(self, revision)

    def current_revision(self) -> str | None:
        """The migration revision the database is at, or None for a blank database."""
        from opencrab.store import migrate

        return migrate.current(self)

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()
