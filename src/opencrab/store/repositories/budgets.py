"""Budget caps and alerts (`budget_caps`, `budget_alerts`): the one writer of both, and
the spend sums the budget checks read: from the daily rollup `llm_usage_daily` (by agent
and by day: `llm_usage_agent_daily`, per UTC day, agent and task type, a few rows a day
instead of one per provider, model, purpose and status) when the periods start at UTC
midnights (as core/budgets.py's always do; their rows change in the transaction of every
call's insert, so a check sees the same spend as a sum over `llm_usage_metrics`), else
from the calls.

Example:
    with db.write() as conn:
        save_fleet_caps(conn, 5.0, 100.0, now)
        record_alert(conn, AlertRow("fleet", "daily", "2026-11-24", 80, 5.0, 4.1), now)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.dialects import recoverable
from opencrab.store.prepared import Prepared
from opencrab.store.repositories.metrics import midnight_key
from opencrab.store.tables import (
    budget_alerts,
    budget_caps,
    llm_usage_agent_daily,
    llm_usage_daily,
    llm_usage_metrics,
)

FLEET = "fleet"


@dataclass(frozen=True)
class AlertRow:
    """A threshold (percent) of a cap reached in a period, with the spend when seen."""

    scope: str  # "fleet" or an agent id
    cap: str  # daily | monthly
    period: str  # 2026-11-24 | 2026-11
    threshold: int  # 80 | 100
    cap_usd: float
    spent_usd: float
    created_at: datetime | None = None


def _raw(column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[Any]:
    """A float column read as the driver gives it (a float on both databases): the
    Float type's result processor on PostgreSQL wants the column's type OID, which a
    `Prepared` statement has not got."""
    return sa.type_coerce(column, sa.types.NullType()).label(name)


_FLEET_CAPS = Prepared(
    sa.select(
        _raw(budget_caps.c.daily_usd, "daily"), _raw(budget_caps.c.monthly_usd, "monthly")
    ).where(budget_caps.c.scope == sa.bindparam("scope"))
)


def fleet_caps(conn: Connection) -> tuple[float | None, float | None] | None:
    """The fleet's (daily, monthly) caps set at runtime; None when never set."""
    row = _FLEET_CAPS.first(conn, scope=FLEET)
    if row is None:
        return None
    daily, monthly = row
    return (
        None if daily is None else float(daily),
        None if monthly is None else float(monthly),
    )


def fleet_caps_later(conn: Connection) -> Callable[[], tuple[float | None, float | None] | None]:
    """`fleet_caps` read in the caller's transaction, given when the returned function is
    called: after the commit on PostgreSQL, where it travels with it (Prepared.rows_later)."""
    rows = _FLEET_CAPS.rows_later(conn, scope=FLEET)

    def caps() -> tuple[float | None, float | None] | None:
        found = rows()
        if not found:
            return None
        daily, monthly = found[0]
        return (
            None if daily is None else float(daily),
            None if monthly is None else float(monthly),
        )

    return caps


def save_fleet_caps(
    conn: Connection, daily_usd: float | None, monthly_usd: float | None, now: datetime
) -> None:
    """Store the fleet's caps (None: no cap), replacing any stored before."""
    key = budget_caps.c.scope == FLEET
    values = {"daily_usd": daily_usd, "monthly_usd": monthly_usd, "updated_at": now}
    if conn.execute(budget_caps.update().where(key).values(**values)).rowcount == 0:
        conn.execute(budget_caps.insert().values(scope=FLEET, **values))


def record_alert(conn: Connection, alert: AlertRow, now: datetime) -> bool:
    """Record the alert unless that cap, period and threshold has one; True when new."""
    c = budget_alerts.c
    seen = conn.execute(
        sa.select(c.id).where(
            c.scope == alert.scope,
            c.cap == alert.cap,
            c.period == alert.period,
            c.threshold == alert.threshold,
        )
    ).first()
    if seen is not None:
        return False
    try:
        with recoverable(conn):
            conn.execute(
                budget_alerts.insert().values(
                    scope=alert.scope,
                    cap=alert.cap,
                    period=alert.period,
                    threshold=alert.threshold,
                    cap_usd=alert.cap_usd,
                    spent_usd=alert.spent_usd,
                    created_at=now,
                )
            )
    except sa.exc.IntegrityError:  # another process recorded it first
        return False
    return True


def alerts(conn: Connection, since: datetime | None, limit: int) -> list[AlertRow]:
    """Alerts recorded since `since` (or all), newest first, at most `limit`."""
    c = budget_alerts.c
    query = sa.select(budget_alerts).order_by(c.created_at.desc(), c.id.desc()).limit(limit)
    if since is not None:
        query = query.where(c.created_at >= since)
    return [
        AlertRow(
            scope=r.scope,
            cap=r.cap,
            period=r.period,
            threshold=int(r.threshold),
            cap_usd=float(r.cap_usd),
            spent_usd=float(r.spent_usd),
            created_at=r.created_at,
        )
        for r in conn.execute(query)
    ]


def spend(
    conn: Connection, agent_id: str | None, day: datetime, month: datetime
) -> tuple[float, float]:
    """USD spent since `day` and since `month` (`month` <= `day`) by one agent or the
    whole fleet (`agent_id` None): one aggregate query, over the daily rollup when both
    are UTC midnights."""
    agent, _, query = _spend_query(day, month, llm_usage_daily)
    if agent_id is not None:
        query = query.where(agent == str(agent_id))
    since_day, since_month = conn.execute(query).one()
    return float(since_day or 0.0), float(since_month or 0.0)


def spend_by_agent(
    conn: Connection, day: datetime, month: datetime, task_type: str | None = None
) -> dict[str, tuple[float, float]]:
    """(since `day`, since `month`) USD by agent, optionally of one task type only: one
    grouped query, over the budgets' rollup (`llm_usage_agent_daily`) when both are UTC
    midnights."""
    agent, task, query = _spend_query(day, month)
    query = query.add_columns(agent).group_by(agent)
    if task_type is not None:
        query = query.where(task == task_type)
    return {str(a): (float(d or 0.0), float(t or 0.0)) for d, t, a in conn.execute(query)}


def _spend_query(
    day: datetime, month: datetime, rollup: sa.Table = llm_usage_agent_daily
) -> tuple[sa.ColumnElement[Any], sa.ColumnElement[Any], sa.Select[Any]]:
    """The agent and task type columns, and SELECT (spend since `day`, since `month`)
    over the rollup when both are UTC midnights (its rows change in the transaction of
    each call's insert, so no raw calls are added), else over the calls."""
    day_key, month_key = midnight_key(day), midnight_key(month)
    if day_key is not None and month_key is not None:
        d = rollup.c
        agent, cost, task = d.agent_id, d.cost_usd, d.task_type
        today: sa.ColumnElement[bool] = d.day >= day_key
        period = d.day >= month_key
    else:
        m = llm_usage_metrics.c
        agent, cost, task = m.agent_id, m.estimated_cost_usd, m.task_type
        today, period = m.timestamp >= day, m.timestamp >= month
    query = sa.select(sa.func.sum(sa.case((today, cost), else_=0.0)), sa.func.sum(cost))
    return agent, task, query.where(period)


def daily_spend(conn: Connection, since_day: str) -> list[tuple[str, str, str, float]]:
    """(agent id, day, task type, USD) of every day from `since_day` (YYYY-MM-DD, UTC)
    on: one grouped query over the daily rollup."""
    d = llm_usage_agent_daily.c
    agent = d.agent_id
    query = (
        sa.select(agent, d.day, d.task_type, sa.func.sum(d.cost_usd))
        .where(d.day >= since_day)
        .group_by(agent, d.day, d.task_type)
    )
    return [(str(a), str(day), str(t), float(c or 0.0)) for a, day, t, c in conn.execute(query)]
