"""The inbox's record of the items it noticed (`inbox_items`): the one writer of that table.

An item (reports/inbox.py) is noticed once: `notice` inserts the rows of keys not
stored yet and returns the ones THIS call inserted, so of several processes noticing
the same new item exactly one owns its notification (the key is the primary key: a
second insert fails, and that process leaves the item alone). The owner records how the
sending went with `finish`; a row left `sending` by a process that died is taken over by
`reclaim` once it is older than the caller's cut-off (a conditional update, so by one).
Budget alerts and spend alarms are dismissed here (`dismiss`, `dismissed`). The
webhook's signing secret, when set through the API, is kept encrypted in
`inbox_secrets` (`save_secret`, `stored_secret`: the caller encrypts and decrypts).

Example:
    with db.write() as conn:
        mine = notice(conn, [Noticed("approval:…", "approval", agent_id, "…")], owner, now)
        finish(conn, mine, "sent", None, now)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.dialects import recoverable
from opencrab.store.tables import inbox_items as table
from opencrab.store.tables import inbox_secrets

NotifyStatus = Literal["sending", "sent", "failed", "quiet"]
MAX_SUMMARY = 500
MAX_ERROR = 500


@dataclass(frozen=True)
class Noticed:
    """An item as the notifier records it."""

    key: str
    kind: str
    agent_id: str | None
    summary: str


@dataclass(frozen=True)
class ItemRow:
    """A stored row: the item, when it was first seen, its notification's outcome."""

    key: str
    kind: str
    agent_id: str | None
    summary: str
    first_seen_at: datetime
    notify_status: str
    notified_at: datetime | None
    notify_error: str | None
    dismissed_at: datetime | None
    dismissed_by: str | None


def _row(row: sa.Row[tuple[object, ...]]) -> ItemRow:
    m = row._mapping
    return ItemRow(
        key=m["key"],
        kind=m["kind"],
        agent_id=m["agent_id"],
        summary=m["summary"],
        first_seen_at=m["first_seen_at"],
        notify_status=m["notify_status"],
        notified_at=m["notified_at"],
        notify_error=m["notify_error"],
        dismissed_at=m["dismissed_at"],
        dismissed_by=m["dismissed_by"],
    )


def notice(
    conn: Connection,
    items: Iterable[Noticed],
    owner: str,
    now: datetime,
    status: NotifyStatus = "sending",
) -> list[str]:
    """Insert the items not stored yet (`status`, claimed by `owner`); the keys this
    call inserted, in the order given. A key another process inserts meanwhile is
    skipped (its insert fails in a savepoint; the transaction goes on)."""
    wanted = {item.key: item for item in items}
    if not wanted:
        return []
    stored = set()
    keys = list(wanted)
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        stored |= set(conn.execute(sa.select(table.c.key).where(table.c.key.in_(chunk))).scalars())
    mine = []
    for key, item in wanted.items():
        if key in stored:
            continue
        try:
            with recoverable(conn):
                conn.execute(
                    table.insert().values(
                        key=key,
                        kind=item.kind,
                        agent_id=item.agent_id,
                        summary=item.summary[:MAX_SUMMARY],
                        first_seen_at=now,
                        notify_status=status,
                        notify_owner=owner,
                        notify_claimed_at=now,
                    )
                )
        except sa.exc.IntegrityError:  # another process noticed it first: theirs
            continue
        mine.append(key)
    return mine


def reclaim(conn: Connection, owner: str, now: datetime, stale_before: datetime) -> list[ItemRow]:
    """Take over rows left `sending` since before `stale_before` (their process died
    before it recorded the outcome); each by one caller only."""
    c = table.c
    stale = conn.execute(
        sa.select(c.key).where(c.notify_status == "sending", c.notify_claimed_at < stale_before)
    ).scalars()
    taken = []
    for key in list(stale):
        done = conn.execute(
            table.update()
            .where(c.key == key, c.notify_status == "sending", c.notify_claimed_at < stale_before)
            .values(notify_owner=owner, notify_claimed_at=now)
        )
        if done.rowcount == 1:
            taken.append(key)
    return rows(conn, taken)


def rows(conn: Connection, keys: Iterable[str]) -> list[ItemRow]:
    """The stored rows of these keys (those that exist)."""
    wanted = list(keys)
    if not wanted:
        return []
    found = conn.execute(sa.select(table).where(table.c.key.in_(wanted)))
    return [_row(r) for r in found]


def finish(
    conn: Connection, keys: Iterable[str], status: NotifyStatus, error: str | None, now: datetime
) -> None:
    """Record how sending these items' notification went."""
    wanted = list(keys)
    if not wanted:
        return
    conn.execute(
        table.update()
        .where(table.c.key.in_(wanted))
        .values(
            notify_status=status,
            notified_at=now,
            notify_error=None if error is None else error[:MAX_ERROR],
        )
    )


def dismiss(conn: Connection, item: Noticed, by: str, now: datetime) -> bool:
    """Mark the item dismissed by `by` (stored first when never noticed); False when
    it was dismissed already."""
    c = table.c
    done = conn.execute(
        table.update()
        .where(c.key == item.key, c.dismissed_at.is_(None))
        .values(dismissed_at=now, dismissed_by=by)
    )
    if done.rowcount == 1:
        return True
    if conn.execute(sa.select(c.key).where(c.key == item.key)).first() is not None:
        return False
    try:
        with recoverable(conn):
            conn.execute(
                table.insert().values(
                    key=item.key,
                    kind=item.kind,
                    agent_id=item.agent_id,
                    summary=item.summary[:MAX_SUMMARY],
                    first_seen_at=now,
                    notify_status="quiet",
                    dismissed_at=now,
                    dismissed_by=by,
                )
            )
    except sa.exc.IntegrityError:  # noticed meanwhile by another process: dismiss that
        return dismiss(conn, item, by, now)
    return True


def dismissed(conn: Connection, kinds: Iterable[str], since: datetime) -> set[str]:
    """Keys of these kinds dismissed since `since`."""
    c = table.c
    query = sa.select(c.key).where(
        c.kind.in_(list(kinds)), c.dismissed_at.is_not(None), c.dismissed_at >= since
    )
    return set(conn.execute(query).scalars())


def deliveries(conn: Connection, *, failed_only: bool = False, limit: int = 50) -> list[ItemRow]:
    """Items whose notification was sent or failed, the latest outcome first."""
    c = table.c
    statuses = ["failed"] if failed_only else ["sent", "failed"]
    query = (
        sa.select(table)
        .where(c.notify_status.in_(statuses))
        .order_by(c.notified_at.desc(), c.key)
        .limit(limit)
    )
    return [_row(r) for r in conn.execute(query)]


def save_secret(conn: Connection, name: str, encrypted: str | None, now: datetime) -> None:
    """Store an encrypted secret under `name` (None: remove it)."""
    conn.execute(inbox_secrets.delete().where(inbox_secrets.c.name == name))
    if encrypted is not None:
        conn.execute(
            inbox_secrets.insert().values(name=name, value_encrypted=encrypted, updated_at=now)
        )


def stored_secret(conn: Connection, name: str) -> tuple[str, datetime] | None:
    """The encrypted secret stored under `name` and when it was set, or None."""
    row = conn.execute(
        sa.select(inbox_secrets.c.value_encrypted, inbox_secrets.c.updated_at).where(
            inbox_secrets.c.name == name
        )
    ).first()
    return None if row is None else (row[0], row[1])
