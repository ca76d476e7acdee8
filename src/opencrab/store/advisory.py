"""Transaction-scoped locks by name, for work two processes must not do at once.

`hold(conn, names)` serialises the rest of the transaction against every other
transaction holding one of `names`: SQLite's write transaction holds the database's
write lock already (nothing to do); PostgreSQL takes one `pg_advisory_xact_lock` per
name, keyed by a signed 64-bit hash of it (the same in every process), in key order so
two holders of several names never deadlock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def key_of(name: str) -> int:
    """The PostgreSQL advisory lock key of `name`."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def hold(conn: Connection, names: Iterable[str]) -> None:
    """Hold the locks of `names` until the transaction ends (module docstring)."""
    if conn.dialect.name == "sqlite":
        return
    for key in sorted({key_of(name) for name in names}):
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
