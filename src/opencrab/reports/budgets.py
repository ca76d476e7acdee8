"""Budgets as the API and the Budgets page show them: the fleet's and every agent's caps,
spend today and this month (UTC), the forecast of both (core/budgets.forecast), the idle
cost (heartbeat turns) and the alerts.

`budgets_view` records the alerts the spend reached since the last check and tells the
alert outlets, so reading the view is what raises them (`GET /api/budgets`, the page).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from opencrab.core.budgets import AgentSpend, Budgets, Overview, Spend, notify, ticket_of
from opencrab.core.runtime import Runtime
from opencrab.offload import run_blocking
from opencrab.reports.model import ApiModel
from opencrab.store.repositories.budgets import FLEET, AlertRow


class SpendFigures(ApiModel):
    daily_cap_usd: float | None
    monthly_cap_usd: float | None
    spent_today_usd: float
    spent_month_usd: float
    forecast_today_usd: float = Field(
        description="Today's spend at 24:00 UTC if the rate so far goes on "
        "(spend so far / elapsed fraction of the day, at least 1/24)."
    )
    forecast_month_usd: float = Field(description="The same for the calendar month.")


class AgentBudget(SpendFigures):
    agent_id: str
    name: str
    heartbeat_today_usd: float = Field(description="What heartbeat turns cost today.")
    heartbeat_month_usd: float


class Alert(ApiModel):
    scope: str = Field(description="fleet, agent or ticket")
    agent_id: str | None
    agent_name: str | None
    ticket_id: str | None = Field(default=None, description="The ticket (scope ticket).")
    cap: str = Field(description="daily, monthly or ticket (its maxCostUsd)")
    period: str = Field(
        description="2026-11-24 (daily) or 2026-11 (monthly), UTC; ticket: once per ticket"
    )
    threshold_percent: int = Field(description="80 or 100")
    cap_usd: float
    spent_usd: float
    created_at: datetime | None


class BudgetsView(ApiModel):
    fleet: SpendFigures
    fleet_caps_source: str = Field(description="api (set through PUT) or config ([budgets])")
    agents: list[AgentBudget]
    alerts: list[Alert]


def _figures(spend: Spend) -> dict[str, Any]:
    return {
        "daily_cap_usd": spend.daily_cap_usd,
        "monthly_cap_usd": spend.monthly_cap_usd,
        "spent_today_usd": round(spend.today_usd, 8),
        "spent_month_usd": round(spend.month_usd, 8),
        "forecast_today_usd": round(spend.forecast_today_usd, 8),
        "forecast_month_usd": round(spend.forecast_month_usd, 8),
    }


def _agent(row: AgentSpend) -> AgentBudget:
    return AgentBudget(
        agent_id=row.agent_id,
        name=row.name,
        heartbeat_today_usd=round(row.heartbeat_today_usd, 8),
        heartbeat_month_usd=round(row.heartbeat_month_usd, 8),
        **_figures(row.spend),
    )


def alert_view(row: AlertRow, names: dict[str, str]) -> Alert:
    """An alert as the API shows it, with the agent's name."""
    fleet = row.scope == FLEET
    ticket = ticket_of(row.scope)
    agent = not fleet and ticket is None
    return Alert(
        scope="fleet" if fleet else "ticket" if ticket is not None else "agent",
        agent_id=row.scope if agent else None,
        agent_name=names.get(row.scope) if agent else None,
        ticket_id=ticket,
        cap=row.cap,
        period=row.period,
        threshold_percent=row.threshold,
        cap_usd=row.cap_usd,
        spent_usd=round(row.spent_usd, 8),
        created_at=row.created_at,
    )


async def budgets_view(runtime: Runtime) -> BudgetsView:
    """The figures GET /api/budgets answers and the Budgets page shows."""
    if runtime.router.metrics is not None:
        await runtime.router.metrics.flush()  # calls just made count
    budgets = Budgets(runtime.db, runtime.settings)

    def read() -> tuple[Overview, list[AlertRow], bool]:
        agents = runtime.agents.list()
        before = {(a.scope, a.cap, a.period, a.threshold) for a in budgets.alerts()}
        overview = budgets.overview(agents)
        fresh = [
            a for a in overview.alerts if (a.scope, a.cap, a.period, a.threshold) not in before
        ]
        return overview, fresh, budgets.fleet_caps_stored()

    overview, fresh, stored = await run_blocking(read)
    names = {a.agent_id: a.name for a in overview.agents}
    notify(runtime.settings, fresh, names, runtime.outlets)
    return BudgetsView(
        fleet=SpendFigures(**_figures(overview.fleet)),
        fleet_caps_source="api" if stored else "config",
        agents=[_agent(a) for a in overview.agents],
        alerts=[alert_view(a, names) for a in overview.alerts],
    )


async def budget_alerts(runtime: Runtime, since: datetime | None, limit: int) -> list[Alert]:
    """Budget alerts raised since `since` (None: any time), newest first, at most `limit`."""
    budgets = Budgets(runtime.db, runtime.settings)
    rows = await run_blocking(budgets.alerts, since, limit)
    names = {a[0]: a[1] for a in await run_blocking(runtime.agents.summaries)}
    return [alert_view(row, names) for row in rows]
