"""Budgets as the API and the Budgets page show them: the fleet's and every agent's caps,
spend today and this month (UTC), the forecast of both (core/budgets.forecast), the idle
cost (heartbeat turns) and the alerts.

`budgets_view` records the alerts the spend reached since the last check and tells the
alert outlets, so reading the view is what raises them (`GET /api/budgets`, the page).
It also gives the slow-burn figures and alarms (core/spend_alarms.py) of the fleet and
every agent: today's spend against the trailing median and the expected daily spend,
what an agent spent on its own, the month's forecast against its line. The alarms are
inbox items (reports/inbox.py), so they reach the inbox's outlets.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from opencrab.core.budgets import AgentSpend, Budgets, Overview, Spend, notify, ticket_of
from opencrab.core.runtime import Runtime
from opencrab.core.spend_alarms import Alarm, Burn, slow_burn
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


class SpendAlarmView(ApiModel):
    id: str = Field(description="The alarm's inbox item id (dismiss it there).")
    rule: str = Field(description="baseline, expected, unattended or forecast")
    scope: str = Field(description="fleet or agent")
    agent_id: str | None
    agent_name: str | None
    period: str = Field(description="The UTC day (forecast: the month) it is about.")
    value_usd: float = Field(description="The figure that crossed the line.")
    line_usd: float = Field(description="The line it crossed.")
    detail: str = Field(description="The numbers behind it, in words.")


class SlowBurn(ApiModel):
    scope: str = Field(description="fleet or agent")
    agent_id: str | None
    name: str
    today_usd: float
    baseline_usd: float | None = Field(
        description="The median daily spend of the trailing days (null: under 3 days)."
    )
    baseline_days: int
    expected_daily_usd: float | None
    unattended_today_usd: float = Field(
        description="What the agent spent today on its own (heartbeats, tickets, schedules)."
    )
    person_quiet: bool = Field(description="No call a person started lately.")
    forecast_month_usd: float
    forecast_line_usd: float | None = Field(
        description="The month's forecast alarms at this (configured, else the monthly cap)."
    )
    alarms: list[SpendAlarmView]


class BudgetsView(ApiModel):
    fleet: SpendFigures
    fleet_caps_source: str = Field(description="api (set through PUT) or config ([budgets])")
    agents: list[AgentBudget]
    alerts: list[Alert]
    slow_burn: list[SlowBurn] = Field(description="The fleet first, then every agent.")


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


def alarm_view(alarm: Alarm) -> SpendAlarmView:
    """A slow-burn alarm as the API shows it."""
    return SpendAlarmView(
        id=f"spend_alarm:{alarm.key}",
        rule=alarm.rule,
        scope="fleet" if alarm.agent_id is None else "agent",
        agent_id=alarm.agent_id,
        agent_name=None if alarm.agent_id is None else alarm.name,
        period=alarm.period,
        value_usd=round(alarm.value_usd, 8),
        line_usd=round(alarm.line_usd, 8),
        detail=alarm.detail,
    )


def _burn(burn: Burn) -> SlowBurn:
    agent = None if burn.scope == FLEET else burn.scope
    return SlowBurn(
        scope="fleet" if agent is None else "agent",
        agent_id=agent,
        name=burn.name,
        today_usd=round(burn.today_usd, 8),
        baseline_usd=None if burn.baseline_usd is None else round(burn.baseline_usd, 8),
        baseline_days=burn.baseline_days,
        expected_daily_usd=burn.expected_usd,
        unattended_today_usd=round(burn.unattended_today_usd, 8),
        person_quiet=burn.person_quiet,
        forecast_month_usd=round(burn.forecast_month_usd, 8),
        forecast_line_usd=burn.forecast_line_usd,
        alarms=[alarm_view(a) for a in burn.alarms],
    )


async def budgets_view(runtime: Runtime) -> BudgetsView:
    """The figures GET /api/budgets answers and the Budgets page shows."""
    if runtime.router.metrics is not None:
        await runtime.router.metrics.flush()  # calls just made count
    budgets = Budgets(runtime.db, runtime.settings)

    def read() -> tuple[Overview, list[AlertRow], bool, list[Burn]]:
        agents = runtime.agents.list()
        before = {(a.scope, a.cap, a.period, a.threshold) for a in budgets.alerts()}
        overview = budgets.overview(agents)
        fresh = [
            a for a in overview.alerts if (a.scope, a.cap, a.period, a.threshold) not in before
        ]
        burn = slow_burn(runtime.db, runtime.settings, agents)
        return overview, fresh, budgets.fleet_caps_stored(), burn.scopes

    overview, fresh, stored, burns = await run_blocking(read)
    names = {a.agent_id: a.name for a in overview.agents}
    notify(runtime.settings, fresh, names, runtime.outlets)
    return BudgetsView(
        fleet=SpendFigures(**_figures(overview.fleet)),
        fleet_caps_source="api" if stored else "config",
        agents=[_agent(a) for a in overview.agents],
        alerts=[alert_view(a, names) for a in overview.alerts],
        slow_burn=[_burn(b) for b in burns],
    )


async def budget_alerts(runtime: Runtime, since: datetime | None, limit: int) -> list[Alert]:
    """Budget alerts raised since `since` (None: any time), newest first, at most `limit`."""
    budgets = Budgets(runtime.db, runtime.settings)
    rows = await run_blocking(budgets.alerts, since, limit)
    names = {a[0]: a[1] for a in await run_blocking(runtime.agents.summaries)}
    return [alert_view(row, names) for row in rows]
