"""Budget reservations (`budget_reservations`): the one writer of the table, and the
figures a reservation is decided on.

A reservation holds one LLM call attempt's estimated cost against the caps of its
agent, its ticket and the fleet while the call runs (core/reservations.py decides). It
is taken in a write transaction that first serialises the reservations of the same
scopes: SQLite's `BEGIN IMMEDIATE` (Database.write) lets one writer in at a time;
PostgreSQL takes a transaction-level advisory lock per capped scope (`lock`, in one
order, so two never wait on each other), after which one statement reads the spend and
the live reservations in one snapshot (READ COMMITTED: the snapshot is taken after the
lock is held, so the previous holder's reservation is seen). Its id is the attempt's
`llm_usage_metrics` id: `settle` deletes it in the transaction that stores that row,
so the call counts once, as reserved or as spent, never as neither. A row names the
process that took it and expires (`expires_at`); a crashed process's reservations
stop counting then.

Example:
    with db.write() as conn:
        lock(conn, ["fleet", "agent:" + agent_id])
        figures = standing(conn, agent_id, None, day, month, now, fleet=True)
        insert(conn, Hold(call_id, owner, agent_id, None, 0.02), now, now + ttl)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store import advisory
from opencrab.store.repositories.metrics import utc_day_key
from opencrab.store.tables import budget_reservations, llm_usage_daily


@dataclass(frozen=True)
class Hold:
    """One call attempt's reservation: its metrics id, who holds it, what it counts
    against (an agent id or "system"; a ticket id or None) and its estimated cost."""

    id: str
    owner: str
    agent_id: str
    ticket_id: str | None
    cost_usd: float


@dataclass(frozen=True)
class Figures:
    """Spend and live reservations read in one snapshot (USD): the agent's and the
    fleet's spend (today, this month) and what calls running now hold of each scope."""

    agent_spent: tuple[float, float]
    fleet_spent: tuple[float, float]
    agent_reserved: float
    fleet_reserved: float
    ticket_reserved: float


def lock(conn: Connection, scopes: Sequence[str]) -> None:
    """Serialise reservations of `scopes` ("fleet", "agent:<id>", "ticket:<id>") until
    the transaction ends (opencrab.store.advisory)."""
    advisory.hold(conn, (f"opencrab-budget:{scope}" for scope in scopes))


def standing(
    conn: Connection,
    agent_id: str,
    ticket_id: str | None,
    day: datetime,
    month: datetime,
    now: datetime,
    *,
    fleet: bool,
) -> Figures:
    """The agent's (and with `fleet`, the fleet's) spend since the UTC midnights `day`
    and `month`, and the live reservations of the agent, the ticket and the fleet: one
    statement, so one snapshot."""
    d, r = llm_usage_daily.c, budget_reservations.c
    day_key, month_key = utc_day_key(day), utc_day_key(month)
    zero = sa.literal(0.0)

    def spent(since: str, mine: bool) -> sa.ScalarSelect[Any]:
        query = sa.select(sa.func.coalesce(sa.func.sum(d.cost_usd), zero)).where(d.day >= since)
        return (query.where(d.agent_id == agent_id) if mine else query).scalar_subquery()

    def held(*where: sa.ColumnElement[bool]) -> sa.ScalarSelect[Any]:
        query = sa.select(sa.func.coalesce(sa.func.sum(r.cost_usd), zero))
        return query.where(r.expires_at > now, *where).scalar_subquery()

    columns: list[Any] = [
        spent(day_key, True),
        spent(month_key, True),
        spent(day_key, False) if fleet else zero,
        spent(month_key, False) if fleet else zero,
        held(r.agent_id == agent_id),
        held() if fleet else zero,
        held(r.ticket_id == ticket_id) if ticket_id is not None else zero,
    ]
    row = conn.execute(sa.select(*columns)).one()
    a_day, a_month, f_day, f_month, a_held, f_held, t_held = (float(v or 0.0) for v in row)
    return Figures((a_day, a_month), (f_day, f_month), a_held, f_held, t_held)


def insert(conn: Connection, hold: Hold, now: datetime, expires_at: datetime) -> None:
    """Store a reservation (it counts until settled or `expires_at`); expired rows of
    any process go in the same transaction."""
    r = budget_reservations.c
    conn.execute(budget_reservations.delete().where(r.expires_at <= now))
    conn.execute(
        budget_reservations.insert().values(
            id=hold.id,
            owner=hold.owner,
            agent_id=hold.agent_id,
            ticket_id=hold.ticket_id,
            cost_usd=hold.cost_usd,
            created_at=now,
            expires_at=expires_at,
        )
    )


def settle(conn: Connection, ids: Sequence[str]) -> None:
    """Remove the reservations of these calls: their metrics rows are stored in this
    transaction (settled with the real cost), or they failed without one (released)."""
    if ids:
        r = budget_reservations.c
        conn.execute(budget_reservations.delete().where(r.id.in_([str(i) for i in ids])))


def live(conn: Connection, now: datetime) -> list[Hold]:
    """The reservations that count at `now`, oldest first."""
    r = budget_reservations.c
    query = sa.select(r.id, r.owner, r.agent_id, r.ticket_id, r.cost_usd).where(r.expires_at > now)
    return [Hold(*row) for row in conn.execute(query.order_by(r.created_at, r.id))]
