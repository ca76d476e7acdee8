"""Leases: work that must run once across processes is claimed through a `leases` row.

A lease names what is leased (a key: `turn:<session id>`, `heartbeat:<agent id>`,
`ticket:<ticket id>`, `follow-up:<approval id>`, `discussion:<session id>`,
`agent-mode:<session id>`, `schedule-run:<run id>`, or `member:<owner>`: a process
sharing the heartbeats, see store.lease_keeper), the process that holds it (`owner`,
unique per process: `PROCESS_OWNER`) and when it expires. A lease is taken when it is
free, expired or already the taker's; taking one's own lease again renews it. A process
that dies stops renewing, so its leases expire and another process may take the work.
One on this machine whose process is gone (`kill -9`: store.lease_owners tells from the owner's
name) need not wait for that: its leases are taken at once, as if expired, so a session
whose turn died with its process is free for the next turn in seconds, not after the
ttl.

Idle passes are cheap: the keys to take are first looked up in one read that locks
nothing (another owner's lease still valid: not tried), renewals are one UPDATE by owner
over all keys (sent as one parameter), and nothing is written when nothing changes
hands. The keys that look free are then taken in a write transaction that checks again:
on SQLite in `BEGIN IMMEDIATE` (Database.write), so two processes never both see a lease
as free; on PostgreSQL the expired rows are read with `SELECT … FOR UPDATE SKIP LOCKED`
(a row another transaction is deciding on is left to it) and a missing row is inserted
with `ON CONFLICT DO NOTHING`; the expiry clock is the database server's there, so
processes on several machines agree on it. A PostgreSQL lease statement waits for
another transaction's row at most LOCK_WAIT_SECS, and a transaction aborted for a
deadlock (two processes letting go and taking at once) is tried again.

Example:
    store = LeaseStore(db)
    if store.try_acquire("turn:" + session_id, PROCESS_OWNER, ttl_secs=30):
        try:
            ...  # the work; store.exchange(PROCESS_OWNER, 30, renew=[key]) before 30 s pass
        finally:
            store.release([key], PROCESS_OWNER)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from opencrab.store.database import Database
from opencrab.store.lease_owners import owner_gone, process_owner
from opencrab.store.prepared import Prepared
from opencrab.store.tables import leases
from opencrab.store.types import utcnow

PROCESS_OWNER = process_owner()
"""This process's name as a lease owner: host, pid, where it runs and a random part (pids
are reused); see store.lease_owners."""

CHUNK = 500  # keys per statement on SQLite, well under its parameter limit

LOCK_WAIT_SECS = 10.0
"""How long a lease statement waits for a row another transaction holds (PostgreSQL)."""

WRITE_ATTEMPTS = 3
"""Tries of a lease transaction PostgreSQL aborted for a deadlock or a lock wait."""

T = TypeVar("T")


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


def follow_up_key(approval_id: str) -> str:
    """The lease a process holds while it runs the follow-up of `approval_id`'s decision
    (core/approval_followups.py)."""
    return f"follow-up:{approval_id}"


def discussion_key(session_id: str) -> str:
    """The lease a process holds while it drives the discussion `session_id` to its end
    (core.discussion.DiscussionRunner)."""
    return f"discussion:{session_id}"


def agent_mode_key(session_id: str) -> str:
    """The lease a process holds while it watches the agent-mode session `session_id`
    (agentmode.runner.AgentModeRunner)."""
    return f"agent-mode:{session_id}"


def schedule_run_key(run_id: str) -> str:
    """The lease a process holds while it runs the schedule run `run_id`
    (schedules/scheduler.py): taken before the run is recorded, let go of after its end
    is, so a run recorded as running whose lease nobody holds died with its process."""
    return f"schedule-run:{run_id}"


MEMBER_PREFIX = "member:"


def member_key(owner: str) -> str:
    """The lease a process holds while it shares wanted work (heartbeats) with the others:
    the live ones say how many processes the work is shared among (LeaseKeeper)."""
    return MEMBER_PREFIX + owner


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
        """Let go of `release`, renew `renew` where still `owner`'s, take `take` where
        free, expired or `owner`'s; returns the keys of both `owner` holds.

        Cheap when nothing changes hands: the keys to take are first looked up in one
        read (no lock, no write) and only the free, expired or own ones are tried; the
        renewals are one UPDATE by owner. The letting go, renewing and taking then run
        in one write transaction, which is skipped when none of them has anything to do.
        """
        dropped = sorted(set(release))
        renewing = set(renew)
        taking = set(take)
        gone: set[str] = set()
        if taking:
            with self.db.read() as conn:
                taking, gone = self._open_in(conn, owner, taking)
        if not dropped and not renewing and not taking:
            return set()  # no write: a read-only store is fine while nothing is leased
        return _retried(lambda: self._write(owner, ttl_secs, dropped, renewing, taking, gone))

    def _write(
        self,
        owner: str,
        ttl_secs: float,
        dropped: list[str],
        renewing: set[str],
        taking: set[str],
        gone: set[str],
    ) -> set[str]:
        with self.db.write() as conn:
            now = _bounded_lock_waits(conn)
            if dropped:
                _delete(conn, dropped, owner)
            expires = now + timedelta(seconds=ttl_secs)
            if member_key(owner) in renewing:  # a member's pass: the dead members' rows go
                conn.execute(
                    leases.delete().where(
                        _members(), leases.c.expires_at < now - timedelta(seconds=ttl_secs)
                    )
                )
            held = _renew(conn, sorted(renewing | taking), owner, now, expires)
            tried = sorted(taking - held)
            if tried:
                held |= _take(conn, tried, owner, now, expires, gone)
            return held

    @staticmethod
    def _open_in(conn: Connection, owner: str, keys: set[str]) -> tuple[set[str], set[str]]:
        """The keys among `keys` no other living owner holds a valid lease on (free,
        expired, `owner`'s or a gone process's), read without locking anything (the write
        transaction checks again); and the gone owners found holding some of them."""
        c = leases.c
        if _postgres(conn):
            listed = _key_rows(conn, sorted(keys))
            held = conn.execute(
                sa.select(c.key, c.owner).where(
                    c.key.in_(sa.select(listed.c.value)),
                    c.owner != owner,
                    c.expires_at > _now_in_sql(conn),
                )
            ).all()
        else:
            held = _SQLITE_HELD.rows(conn, l_keys=_json(keys), l_owner=owner, l_now=utcnow())
        verdicts: dict[str, bool] = {}
        blocked: set[str] = set()
        for key, holder in held:
            if holder not in verdicts:
                verdicts[holder] = owner_gone(holder)
            if not verdicts[holder]:
                blocked.add(str(key))
        return keys - blocked, {o for o, dead in verdicts.items() if dead}

    def share_view(self, owner: str, keys: Iterable[str]) -> tuple[int, set[str]]:
        """In one read: how many processes hold a live member lease, and which of `keys`
        are open to `owner` (free, expired or its own; see `exchange`)."""
        keys = set(keys)
        with self.db.read() as conn:
            live = sa.and_(_members(), leases.c.expires_at > _now_in_sql(conn))
            members = conn.execute(sa.select(sa.func.count()).select_from(leases).where(live))
            open_keys = self._open_in(conn, owner, keys)[0] if keys else set()
            return int(members.scalar_one()), open_keys

    def release(self, keys: Iterable[str], owner: str) -> None:
        """Let go of `owner`'s leases among `keys` (others' are left alone)."""
        dropped = sorted(set(keys))
        if not dropped:
            return

        def delete() -> None:
            with self.db.write() as conn:
                _bounded_lock_waits(conn)
                _delete(conn, dropped, owner)

        _retried(delete)

    def release_all(self, owner: str) -> int:
        """Let go of every lease `owner` holds (a clean shutdown); returns how many."""

        def delete() -> int:
            with self.db.write() as conn:
                _bounded_lock_waits(conn)
                return int(conn.execute(leases.delete().where(leases.c.owner == owner)).rowcount)

        return _retried(delete)

    def get(self, key: str) -> Lease | None:
        """The lease row of `key`, expired or not; None when nobody holds it."""
        with self.db.read() as conn:
            row = conn.execute(sa.select(leases).where(leases.c.key == key)).first()
        return None if row is None else Lease(**row._asdict())

    def live(self, keys: Iterable[str]) -> set[str]:
        """The keys among `keys` whose lease some process holds now (not expired, and its
        owner not a gone process of this machine)."""
        wanted = sorted(set(keys))
        if not wanted:
            return set()
        held: set[str] = set()
        with self.db.read() as conn:
            now = _now_in_sql(conn)
            for chunk in _chunks(wanted):
                query = sa.select(leases.c.key, leases.c.owner).where(
                    leases.c.key.in_(chunk), leases.c.expires_at > now
                )
                held |= {str(key) for key, owner in conn.execute(query) if not owner_gone(owner)}
        return held

    def held_by(self, owner: str) -> list[str]:
        """The keys whose lease rows name `owner` (expired ones included), sorted."""
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(leases.c.key).where(leases.c.owner == owner).order_by(leases.c.key)
            )
            return [str(r.key) for r in rows]


def _now_in_sql(conn: Connection) -> Any:
    """The clock leases expire by (`_bounded_lock_waits` reads it) as an expression of the
    statement that uses it (no trip of its own)."""
    if _postgres(conn):
        return sa.func.clock_timestamp()
    return sa.literal(utcnow(), leases.c.expires_at.type)


def _delete(conn: Connection, keys: list[str], owner: str) -> None:
    """Delete `owner`'s lease rows among `keys`."""
    if _postgres(conn):
        conn.execute(leases.delete().where(_among(conn, keys), leases.c.owner == owner))
    else:
        _SQLITE_RELEASE.execute(conn, l_keys=_json(keys), l_owner=owner)


def _json(keys: Iterable[str]) -> str:
    """Keys as SQLite's `l_keys` parameter: a JSON list json_each unpacks."""
    return json.dumps(sorted(keys))


# SQLite's lease statements, compiled once (store/prepared.py: no Core statement built and
# no cache key made per call). `l_keys` is a JSON list of keys, one parameter however
# many; the clock is this machine's (`l_now`).
_KEYS = leases.c.key.in_(
    sa.select(sa.func.json_each(sa.bindparam("l_keys")).table_valued("value").c.value)
)
_OWNER = sa.bindparam("l_owner", type_=leases.c.owner.type)
_NOW = sa.bindparam("l_now", type_=leases.c.expires_at.type)
_EXPIRES = sa.bindparam("l_expires", type_=leases.c.expires_at.type)
_SQLITE_HELD = Prepared(
    sa.select(leases.c.key, leases.c.owner).where(
        _KEYS, leases.c.owner != _OWNER, leases.c.expires_at > _NOW
    )
)
_SQLITE_MINE = Prepared(sa.select(leases.c.key).where(_KEYS, leases.c.owner == _OWNER))
_SQLITE_ROWS = Prepared(sa.select(leases.c.key, leases.c.owner, leases.c.expires_at).where(_KEYS))
_SQLITE_RENEW = Prepared(
    leases.update()
    .where(_KEYS, leases.c.owner == _OWNER)
    .values(renewed_at=_NOW, expires_at=_EXPIRES)
)
_SQLITE_TAKE = Prepared(
    leases.update()
    .where(_KEYS)
    .values(owner=_OWNER, acquired_at=_NOW, renewed_at=_NOW, expires_at=_EXPIRES)
)
_SQLITE_INSERT = Prepared(
    leases.insert().values(
        key=sa.bindparam("l_key"),
        owner=_OWNER,
        acquired_at=_NOW,
        renewed_at=_NOW,
        expires_at=_EXPIRES,
    )
)
_SQLITE_RELEASE = Prepared(leases.delete().where(_KEYS, leases.c.owner == _OWNER))


def _retried(write: Callable[[], T]) -> T:
    """`write` (one transaction), tried again when PostgreSQL aborted it as one of two
    transactions waiting for each other's rows, or after LOCK_WAIT_SECS of waiting."""
    for attempt in range(WRITE_ATTEMPTS):
        try:
            return write()
        except sa.exc.OperationalError as exc:
            code = getattr(exc.orig, "sqlstate", None)
            if code not in ("40P01", "55P03") or attempt == WRITE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _members() -> Any:
    """The member leases' rows: a range on the primary key (its index serves; LIKE's may not)."""
    after = MEMBER_PREFIX[:-1] + chr(ord(MEMBER_PREFIX[-1]) + 1)
    return sa.and_(leases.c.key >= MEMBER_PREFIX, leases.c.key < after)


def _postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _bounded_lock_waits(conn: Connection) -> datetime:
    """On PostgreSQL, a lease statement waits for another transaction's row lock at most
    LOCK_WAIT_SECS and then fails (the pass is tried again) instead of waiting forever
    behind a transaction that never ends. SQLite's writers wait the busy timeout.

    Returns the clock leases expire by: the PostgreSQL server's, read in the same
    statement (`set_config(…, true)` is `SET LOCAL`: one round trip for both), else
    this machine's."""
    if not _postgres(conn):
        return utcnow()
    timeout = f"{int(LOCK_WAIT_SECS * 1000)}ms"
    found = conn.execute(
        sa.select(sa.func.set_config("lock_timeout", timeout, True), sa.func.clock_timestamp())
    ).one()
    value = found[1]
    assert isinstance(value, datetime)
    return value


def _key_rows(conn: Connection, keys: list[str]) -> Any:
    """`keys` as rows of one column `value`, sent as one parameter (a PostgreSQL array,
    a JSON list that SQLite's json_each unpacks), however many there are."""
    if _postgres(conn):
        array = sa.bindparam("lease_keys", keys, type_=postgresql.ARRAY(sa.Text))
        return sa.func.unnest(array).table_valued("value").render_derived()
    return sa.func.json_each(sa.bindparam("lease_keys", json.dumps(keys))).table_valued("value")


def _among(conn: Connection, keys: list[str]) -> Any:
    """`leases.key` is one of `keys` (one parameter, see `_key_rows`)."""
    if _postgres(conn):
        return leases.c.key == sa.any_(
            sa.bindparam("lease_keys", keys, type_=postgresql.ARRAY(sa.Text))
        )
    listed = _key_rows(conn, keys)
    return leases.c.key.in_(sa.select(listed.c.value))


def _renew(
    conn: Connection, keys: list[str], owner: str, now: datetime, expires: datetime
) -> set[str]:
    """Renew `owner`'s leases among `keys` in one UPDATE; returns the keys renewed (read
    back only when some of `keys` turned out not to be `owner`'s)."""
    if not keys:
        return set()
    c = leases.c
    if not _postgres(conn):
        listed = _json(keys)
        done = _SQLITE_RENEW.execute(
            conn, l_keys=listed, l_owner=owner, l_now=now, l_expires=expires
        )
        if done == len(keys):
            return set(keys)
        return {str(r.key) for r in _SQLITE_MINE.rows(conn, l_keys=listed, l_owner=owner)}
    mine = sa.and_(c.owner == owner, _among(conn, keys))
    renewed = leases.update().where(mine).values(renewed_at=now, expires_at=expires)
    # the rows renewed come back with the UPDATE: no second read
    return {str(k) for k in conn.execute(renewed.returning(c.key)).scalars()}


def _take(
    conn: Connection,
    keys: list[str],
    owner: str,
    now: datetime,
    expires: datetime,
    gone: set[str],
) -> set[str]:
    """Take the free or expired leases among `keys`, and those of the `gone` owners (none
    is `owner`'s: those were just renewed) inside a write transaction; returns the keys
    taken."""
    if _postgres(conn):
        return _take_postgresql(conn, keys, owner, now, expires, gone)
    # BEGIN IMMEDIATE: no other writer until the commit
    rows = {str(r.key): r for r in _SQLITE_ROWS.rows(conn, l_keys=_json(keys))}
    free = [k for k, r in rows.items() if r.expires_at <= now or r.owner in gone]
    lease = {"l_owner": owner, "l_now": now, "l_expires": expires}
    if free:
        _SQLITE_TAKE.execute(conn, l_keys=_json(free), **lease)
    new = [k for k in keys if k not in rows]
    for key in new:
        _SQLITE_INSERT.execute(conn, l_key=key, **lease)
    return set(free) | set(new)


def _take_postgresql(
    conn: Connection,
    keys: list[str],
    owner: str,
    now: datetime,
    expires: datetime,
    gone: set[str],
) -> set[str]:
    """`_take` in two statements, however many keys: the expired rows (or the `gone`
    owners') another transaction is not deciding on (`FOR UPDATE SKIP LOCKED`) change
    owner, the missing ones are inserted (`ON CONFLICT DO NOTHING`: a row that exists, or
    is being inserted and then commits, is someone else's)."""
    c = leases.c
    lease = {"owner": owner, "acquired_at": now, "renewed_at": now, "expires_at": expires}
    free = c.expires_at <= now
    if gone:
        free = sa.or_(free, c.owner.in_(sorted(gone)))
    expired = (
        sa.select(c.key)
        .where(_among(conn, keys), free, c.owner != owner)
        .with_for_update(skip_locked=True)
    )
    updated = conn.execute(
        leases.update().where(c.key.in_(expired)).values(**lease).returning(c.key)
    )
    taken = {str(k) for k in updated.scalars()}
    listed = _key_rows(conn, keys)
    values = sa.select(
        listed.c.value,
        *(sa.literal(value, getattr(c, name).type).label(name) for name, value in lease.items()),
    )
    inserted = conn.execute(
        postgresql.insert(leases)
        .from_select(["key", *lease], values)
        .on_conflict_do_nothing()
        .returning(c.key)
    )
    return taken | {str(k) for k in inserted.scalars()}


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(keys), CHUNK):
        yield keys[start : start + CHUNK]
