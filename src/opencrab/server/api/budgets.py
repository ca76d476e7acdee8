"""Budgets and alerts over HTTP (issue 21 §3): `/api/budgets`, `/api/budgets/alerts`,
`/api/agents/{id}/budget`.

GET /api/budgets gives the fleet's and every agent's caps, spend today and this month
(UTC), the forecast of both (core/budgets.forecast), the idle cost (heartbeat turns) and
the alerts of this month and the last; it records alerts the spend reached since the last
check. PUT /api/budgets sets the fleet's caps (stored, in place of `[budgets]`); PUT
/api/agents/{id}/budget sets an agent's daily and monthly caps and leaves the rest of its
LLM configuration as it is (the whole of it: PUT /api/agents/{id}/llm/config).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query
from pydantic import Field

from opencrab.core.agent import AgentUpdate
from opencrab.core.budgets import AgentSpend, Budgets, Overview, Spend, notify, ticket_of
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep, AgentStoreDep, RuntimeDep
from opencrab.server.schemas import ApiInput, ApiModel, error_responses
from opencrab.store.repositories.budgets import FLEET, AlertRow

router = APIRouter(prefix="/api", tags=["Budgets"])

Usd = Annotated[float | None, Field(ge=0, strict=True, description="USD; null: no cap.")]


class Caps(ApiInput):
    """Daily (UTC day) and monthly (UTC calendar month) caps in USD; null: no cap."""

    daily_usd: Usd = None
    monthly_usd: Usd = None


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


async def budgets_view(runtime: RuntimeDep) -> BudgetsView:
    """The figures GET /api/budgets answers (the dashboard's Budgets page reads them too)."""
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


@router.get(
    "/budgets",
    operation_id="getBudgets",
    response_model=BudgetsView,
    responses=error_responses(400),
)
async def get_budgets(runtime: RuntimeDep) -> BudgetsView:
    """Caps, spend, forecasts and idle cost of the fleet and each agent; recent alerts."""
    return await budgets_view(runtime)


@router.put(
    "/budgets",
    operation_id="setFleetBudgets",
    response_model=Caps,
    responses=error_responses(400),
)
async def set_fleet_budgets(runtime: RuntimeDep, body: Caps) -> Caps:
    """Set the fleet's daily and monthly caps (null: no cap); from the next call on."""
    budgets = Budgets(runtime.db, runtime.settings)
    await run_blocking(budgets.set_fleet_caps, body.daily_usd, body.monthly_usd)
    return body


@router.get(
    "/budgets/alerts",
    operation_id="listBudgetAlerts",
    response_model=list[Alert],
    responses=error_responses(400),
)
async def list_budget_alerts(
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
) -> list[Alert]:
    """Budget alerts, newest first."""
    budgets = Budgets(runtime.db, runtime.settings)
    rows = await run_blocking(budgets.alerts, None, limit)
    names = {a[0]: a[1] for a in await run_blocking(runtime.agents.summaries)}
    return [alert_view(row, names) for row in rows]


@router.put(
    "/agents/{id}/budget",
    operation_id="setAgentBudget",
    response_model=Caps,
    responses=error_responses(400, 404),
)
def set_agent_budget(agent: AgentDep, body: Caps, agents: AgentStoreDep) -> Caps:
    """Set the agent's daily and monthly caps (null: no cap), the rest of its LLM
    configuration unchanged."""
    config = agent.llm_config.model_copy(
        update={"daily_budget_usd": body.daily_usd, "monthly_budget_usd": body.monthly_usd}
    )
    saved = agents.update(agent.id, AgentUpdate(llm=config)).llm_config
    return Caps(daily_usd=saved.daily_budget_usd, monthly_usd=saved.monthly_budget_usd)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
