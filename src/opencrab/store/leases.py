"""Leases: work that must run once across processes is claimed through a `leases` row.

A lease names what is leased (a key: `turn:<session id>`, `heartbeat:<agent id>`,
`ticket:<ticket id>`), the process that holds it (`owner`, unique per process: `PROCESS_OWNER`)
and when it expires. A lease is taken when it is free, expired or already the taker's;
taking one's own lease again renews it. A process that dies stops renewing, so its
leases expire and another process may take the work.

On SQLite every change runs in a `BEGIN IMMEDIATE` transaction (Database.write), so two
processes never both see a lease as free. On PostgreSQL the rows are read with
`SELECT … FOR UPDATE SKIP LOCKED` (a row another transaction is deciding on is left to
it) and a missing row is inserted with `ON CONFLICT DO NOTHING`; the expiry clock is the
database server's there, so processes on several machines agree on it.

Example:
    store = LeaseStore(db)
    if store.try_acquire("turn:" + session_id, PROCESS_OWNER, ttl_secs=30):
        try:
            ...  # the work; store.exchange(PROCESS_OWNER, 30, renew=[key]) before 30 s pass
        finally:
            store.release([key], PROCESS_OWNER)
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from opencrab.store.database import Database
from opencrab.store.tables import leases
from opencrab.store.types import utcnow

PROCESS_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
"""This process's name as a lease owner: host, pid and a random part (pids are reused)."""

CHUNK = 500  # keys per statement, well under every database's parameter limit


@dataclass(frozen=True)
class Lease:
    """One lease row."""

    key: str
    owner: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


def turn_key(session_id: str) -> str:
    """The lease a turn in `session_id` holds."""
    return f"turn:{session_id}"


def heartbeat_key(agent_id: str) -> str:
    """The lease a process holds while it ticks `agent_id`'s heartbeat."""
    return f"heartbeat:{agent_id}"


def ticket_key(ticket_id: str) -> str:
    """The lease a process holds while it runs `ticket_id` (the ticket scheduler)."""
    return f"ticket:{ticket_id}"


class LeaseStore:
    """The repository of the `leases` table (its only writer)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def try_acquire(self, key: str, owner: str, ttl_secs: float) -> bool:
        """Take (or renew) one lease for `ttl_secs`; False when another owner holds it."""
        return key in self.acquire([key], owner, ttl_secs)

    def acquire(self, keys: Iterable[str], owner: str, ttl_secs: float) -> set[str]:
        """Take or renew every lease of `keys` that is free, expired or `owner`'s, in one
        transaction; returns the keys `owner` now holds."""
        return self.exchange(owner, ttl_secs, take=keys)

    def exchange(
        self,
        owner: str,
        ttl_secs: float,
        *,
        take: Iterable[str] = (),
        renew: Iterable[str] = (),
        release: Iterable[str] = (),
    ) -> set[str]:
        """One transaction: let go of `release`, renew `renew` where still `owner`'s, take
        `take` where free, expired or `owner`'s; returns the keys of both `owner` holds."""
        dropped = sorted(set(release))
        taking = set(take)
        wanted = sorted(taking | set(renew))
        if not dropped and not wanted:
            return set()  # no transaction: a read-only store is fine while nothing is leased
        with self.db.write() as conn:
            if dropped:
                _delete(conn, dropped, owner)
            if not wanted:
                return set()
            now = _now(conn)
            expires = now + timedelta(seconds=ttl_secs)
            held: set[str] = set()
            for chunk in _chunks(wanted):
                held |= _take(conn, chunk, taking, owner, now, expires)
            return held

    def release(self, keys: Iterable[str], owner: str) -> None:
        """Let go of `owner`'s leases among `keys` (others' are left alone)."""
        with self.db.write() as conn:
            _delete(conn, sorted(set(keys)), owner)

    def release_all(self, owner: str) -> int:
        """Let go of every lease `owner` holds (a clean shutdown); returns how many."""
        with self.db.write() as conn:
            return int(conn.execute(leases.delete().where(leases.c.owner == owner)).rowcount)

    def get(self, key: str) -> Lease | None:
        """The lease row of `key`, expired or not; None when nobody holds it."""
        with self.db.read() as conn:
            row = conn.execute(sa.select(leases).where(leases.c.key == key)).first()
        return None if row is None else Lease(**row._asdict())

    def live(self, keys: Iterable[str]) -> set[str]:
        """The keys among `keys` whose lease some process holds now (not expired)."""
        wanted = sorted(set(keys))
        if not wanted:
            return set()
        held: set[str] = set()
        with self.db.read() as conn:
            now = _now(conn)
            for chunk in _chunks(wanted):
                query = sa.select(leases.c.key).where(
                    leases.c.key.in_(chunk), leases.c.expires_at > now
                )
                held |= {str(key) for key in conn.execute(query).scalars()}
        return held

    def held_by(self, owner: str) -> list[str]:
        """The keys whose lease rows name `owner` (expired ones included), sorted."""
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(leases.c.key).where(leases.c.owner == owner).order_by(leases.c.key)
            )
            return [str(r.key) for r in rows]


def _now(conn: Connection) -> datetime:
    """The clock leases expire by: the PostgreSQL server's, else this machine's."""
    if conn.dialect.name == "postgresql":
        value = conn.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
        assert isinstance(value, datetime)
        return value
    return utcnow()


def _take(
    conn: Connection,
    keys: list[str],
    taking: set[str],
    owner: str,
    now: datetime,
    expires: datetime,
) -> set[str]:
    """Renew `owner`'s leases among `keys`, and take the free or expired ones that are in
    `taking` (inside a write transaction); returns the keys `owner` now holds."""
    c = leases.c
    query = sa.select(c.key, c.owner, c.expires_at).where(c.key.in_(keys))
    postgres = conn.dialect.name == "postgresql"
    if postgres:  # rows another transaction holds are skipped: they are not free now
        query = query.with_for_update(skip_locked=True)
    rows = {str(r.key): r for r in conn.execute(query)}
    mine = [k for k, r in rows.items() if r.owner == owner]
    free = [k for k, r in rows.items() if k in taking and r.owner != owner and r.expires_at <= now]
    if mine:
        conn.execute(
            leases.update()
            .where(c.key.in_(mine), c.owner == owner)
            .values(renewed_at=now, expires_at=expires)
        )
    if free:
        conn.execute(
            leases.update()
            .where(c.key.in_(free))  # locked since the select: still as it was read
            .values(owner=owner, acquired_at=now, renewed_at=now, expires_at=expires)
        )
    new = [
        {"key": k, "owner": owner, "acquired_at": now, "renewed_at": now, "expires_at": expires}
        for k in keys
        if k in taking and k not in rows
    ]
    inserted: set[str] = set()
    if new and postgres:  # a row locked by another transaction is not in `rows`
        done = conn.execute(
            postgresql.insert(leases).values(new).on_conflict_do_nothing().returning(c.key)
        )
        inserted = {str(k) for k in done.scalars()}
    elif new:  # BEGIN IMMEDIATE: no other writer can have added one since the select
        conn.execute(leases.insert(), new)
        inserted = {str(row["key"]) for row in new}
    return set(mine) | set(free) | inserted


def _delete(conn: Connection, keys: list[str], owner: str) -> None:
    for chunk in _chunks(keys):
        conn.execute(leases.delete().where(leases.c.key.in_(chunk), leases.c.owner == owner))


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(keys), CHUNK):
        yield keys[start : start + CHUNK]
