"""Budget caps and alerts (`budget_caps`, `budget_alerts`): the one writer of both, and
the spend sums the budget checks read from `llm_usage_metrics`.

Example:
    with db.write() as conn:
        save_fleet_caps(conn, 5.0, 100.0, now)
        record_alert(conn, AlertRow("fleet", "daily", "2026-11-24", 80, 5.0, 4.1), now)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.dialects import recoverable
from opencrab.store.prepared import Prepared
from opencrab.store.tables import budget_alerts, budget_caps, llm_usage_metrics

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


def _spend_query(of_agent: bool) -> Prepared:
    m = llm_usage_metrics.c
    cost = m.estimated_cost_usd
    day = sa.bindparam("day", type_=m.timestamp.type)
    query = sa.select(
        _raw(
            sa.func.coalesce(sa.func.sum(sa.case((m.timestamp >= day, cost), else_=0.0)), 0.0),
            "today",
        ),
        _raw(sa.func.coalesce(sa.func.sum(cost), 0.0), "month"),
    ).where(m.timestamp >= sa.bindparam("month", type_=m.timestamp.type))
    if of_agent:
        query = query.where(m.agent_id == sa.bindparam("agent_id"))
    return Prepared(query)


_SPEND = {True: _spend_query(True), False: _spend_query(False)}


def spend(
    conn: Connection, agent_id: str | None, day: datetime, month: datetime
) -> tuple[float, float]:
    """USD spent since `day` and since `month` (`month` <= `day`) by one agent or the
    whole fleet (`agent_id` None): one query."""
    params: dict[str, Any] = {"day": day, "month": month}
    if agent_id is not None:
        params["agent_id"] = str(agent_id)
    today, this_month = _SPEND[agent_id is not None].rows(conn, **params)[0]
    return float(today or 0.0), float(this_month or 0.0)


def spend_by_agent(
    conn: Connection, day: datetime, month: datetime, task_type: str | None = None
) -> dict[str, tuple[float, float]]:
    """(since `day`, since `month`) USD by agent, optionally of one task type only."""
    m = llm_usage_metrics.c
    cost = m.estimated_cost_usd
    query = (
        sa.select(
            m.agent_id,
            sa.func.sum(sa.case((m.timestamp >= day, cost), else_=0.0)),
            sa.func.sum(cost),
        )
        .where(m.timestamp >= month)
        .group_by(m.agent_id)
    )
    if task_type is not None:
        query = query.where(m.task_type == task_type)
    return {str(a): (float(d or 0.0), float(t or 0.0)) for a, d, t in conn.execute(query)}
