"""Budgets and alerts over HTTP (issue 21 §3): `/api/budgets`, `/api/budgets/alerts`,
`/api/agents/{id}/budget`.

GET /api/budgets gives the fleet's and every agent's caps, spend today and this month
(UTC), the forecasts, the idle cost and the alerts of this month and the last
(opencrab.reports.budgets, which records the alerts the spend reached since the last
check). PUT /api/budgets sets the fleet's caps (stored, in place of `[budgets]`); PUT
/api/agents/{id}/budget sets an agent's daily and monthly caps and leaves the rest of its
LLM configuration as it is (the whole of it: PUT /api/agents/{id}/llm/config).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Query
from pydantic import Field

from opencrab.core.agent import AgentUpdate
from opencrab.core.budgets import Budgets
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import budgets
from opencrab.reports.budgets import Alert, BudgetsView
from opencrab.server.deps import AgentDep, AgentStoreDep, RuntimeDep
from opencrab.server.schemas import ApiInput, error_responses

router = APIRouter(prefix="/api", tags=["Budgets"])

Usd = Annotated[float | None, Field(ge=0, strict=True, description="USD; null: no cap.")]


class Caps(ApiInput):
    """Daily (UTC day) and monthly (UTC calendar month) caps in USD; null: no cap."""

    daily_usd: Usd = None
    monthly_usd: Usd = None


@router.get(
    "/budgets",
    operation_id="getBudgets",
    response_model=BudgetsView,
    responses=error_responses(400),
)
async def get_budgets(runtime: RuntimeDep) -> BudgetsView:
    """Caps, spend, forecasts and idle cost of the fleet and each agent; recent alerts."""
    return await budgets.budgets_view(runtime)


@router.put(
    "/budgets",
    operation_id="setFleetBudgets",
    response_model=Caps,
    responses=error_responses(400),
)
async def set_fleet_budgets(runtime: RuntimeDep, body: Caps) -> Caps:
    """Set the fleet's daily and monthly caps (null: no cap); from the next call on."""
    fleet = Budgets(runtime.db, runtime.settings)
    await run_blocking(fleet.set_fleet_caps, body.daily_usd, body.monthly_usd)
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
    return await budgets.budget_alerts(runtime, None, limit)


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
