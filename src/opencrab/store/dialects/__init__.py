"""Dialect-specific SQL, kept apart so another database only adds a module here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection


@contextmanager
def recoverable(conn: Connection) -> Iterator[None]:
    """Run statements whose failure the caller handles and then keeps using `conn`.

    SQLite undoes only the failed statement; PostgreSQL aborts the whole transaction, so
    there the statements run in a savepoint that is rolled back when they fail.
    """
    if conn.dialect.name == "sqlite":
        yield
        return
    with conn.begin_nested():
        yield
