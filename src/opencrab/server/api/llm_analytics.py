"""The fleet's LLM cost and quality figures (issue 21 point 2): `/api/analytics/llm/...`.

Every route takes the same filter (opencrab.server.usage_filter: period as `from`/`to`
UTC dates or the last `days`, `agentId`, `purpose`, `provider`, `model`, `source`
live|imported) and answers with the report of opencrab.reports.llm_costs, run off the
event loop. The dashboard's Costs page and the export call the same reports, so the page,
the JSON and the CSV never disagree.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, FastAPI, Request

from opencrab.core.runtime import Runtime
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports.llm_costs import (
    CacheReport,
    CostSeries,
    EfficiencyMap,
    ErrorTable,
    QualitySeries,
    Shares,
    SpeedTable,
    Suggestions,
    Totals,
    cache_report,
    cost_report,
    efficiency_report,
    error_report,
    quality_report,
    share_report,
    speed_report,
    suggestions_report,
    totals_report,
)
from opencrab.server.deps import DatabaseDep
from opencrab.server.schemas import error_responses
from opencrab.server.usage_filter import BucketQuery, StackQuery, UsageFilterDep

router = APIRouter(prefix="/api/analytics/llm", tags=["LLM analytics"])

ERRORS = error_responses(400, 404)


@router.get("/totals", operation_id="getLlmTotals", response_model=Totals, responses=ERRORS)
async def get_totals(db: DatabaseDep, flt: UsageFilterDep) -> Totals:
    """Cost, calls, tokens, cached tokens and failed calls of the filtered calls."""
    return await run_blocking(totals_report, db, flt)


@router.get("/cost", operation_id="getLlmCost", response_model=CostSeries, responses=ERRORS)
async def get_cost(
    db: DatabaseDep, flt: UsageFilterDep, bucket: BucketQuery = "day", stack: StackQuery = "model"
) -> CostSeries:
    """Cost over time by day or week, stacked by model, provider, agent or purpose."""
    return await run_blocking(cost_report, db, flt, bucket, stack)


@router.get("/share", operation_id="getLlmShare", response_model=Shares, responses=ERRORS)
async def get_share(db: DatabaseDep, flt: UsageFilterDep, by: StackQuery = "model") -> Shares:
    """Each model's (or provider's, agent's, purpose's) share of calls and cost."""
    return await run_blocking(share_report, db, flt, by)


@router.get(
    "/quality", operation_id="getLlmQuality", response_model=QualitySeries, responses=ERRORS
)
async def get_quality(
    db: DatabaseDep, flt: UsageFilterDep, bucket: BucketQuery = "day"
) -> QualitySeries:
    """Average quality score (evaluate_response) of rated calls over time."""
    return await run_blocking(quality_report, db, flt, bucket)


@router.get(
    "/efficiency", operation_id="getLlmEfficiency", response_model=EfficiencyMap, responses=ERRORS
)
async def get_efficiency(db: DatabaseDep, flt: UsageFilterDep) -> EfficiencyMap:
    """The cost-efficiency map: model × task type, cost per call and average quality."""
    return await run_blocking(efficiency_report, db, flt)


@router.get("/speed", operation_id="getLlmSpeed", response_model=SpeedTable, responses=ERRORS)
async def get_speed(db: DatabaseDep, flt: UsageFilterDep) -> SpeedTable:
    """Latency and time-to-first-token percentiles (p50/p90/p99) per model."""
    return await run_blocking(speed_report, db, flt)


@router.get("/errors", operation_id="getLlmErrors", response_model=ErrorTable, responses=ERRORS)
async def get_errors(db: DatabaseDep, flt: UsageFilterDep) -> ErrorTable:
    """Error rate per provider (calls whose status is not ok)."""
    return await run_blocking(error_report, db, flt)


@router.get("/cache", operation_id="getLlmCache", response_model=CacheReport, responses=ERRORS)
async def get_cache(db: DatabaseDep, flt: UsageFilterDep) -> CacheReport:
    """Cached-token share and what caching saved, per provider/model and in total."""
    return await run_blocking(cache_report, db, flt)


@router.get(
    "/suggestions",
    operation_id="getLlmSuggestions",
    response_model=Suggestions,
    responses=ERRORS,
)
async def get_suggestions(
    request: Request,
    flt: UsageFilterDep,
    goal: Literal["minimize_cost", "maximize_quality", "balance", "minimize_latency"] = "balance",
) -> Suggestions:
    """optimize_model_selection's suggestions (last 30 days of each agent) with evidence."""
    runtime: Runtime = request.app.state.runtime
    return await run_blocking(suggestions_report, runtime, flt, goal)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
