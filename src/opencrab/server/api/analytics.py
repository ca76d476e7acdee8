"""Analytics (seed 001 `/api/agents/{id}/analytics/usage|skills|llm`).

- usage: what the agent did in a period: sessions, messages, log lines by type, actions
  by name with failures, heartbeat decisions, LLM calls and cost, workspace size;
- skills: each skill's use (counted when one of its actions runs), effectiveness and
  how often its actions ran in the period;
- llm: seed 001's `LlmUsageAnalysis` (per model, per purpose, recommendations).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, FastAPI, Query, Request

from opencrab.plugins import hookimpl
from opencrab.reports import analytics
from opencrab.reports.analytics import LlmAnalytics, SkillAnalytics, UsageAnalytics
from opencrab.server.api import analytics_charts as charts
from opencrab.server.deps import AgentDep, DatabaseDep, SettingsDep
from opencrab.server.schemas import Period, error_responses

router = APIRouter(prefix="/api", tags=["Analytics"])


@router.get(
    "/agents/{id}/analytics/usage",
    operation_id="getUsageAnalytics",
    response_model=UsageAnalytics,
    responses=error_responses(400, 404),
)
def get_usage_analytics(
    agent: AgentDep, db: DatabaseDep, settings: SettingsDep, period: Period = "week"
) -> UsageAnalytics:
    """What the agent did in the period."""
    return analytics.usage_analytics(db, settings, agent, period)


@router.get(
    "/agents/{id}/analytics/skills",
    operation_id="getSkillAnalytics",
    response_model=SkillAnalytics,
    responses=error_responses(400, 404),
)
def get_skill_analytics(
    agent: AgentDep, db: DatabaseDep, request: Request, period: Period = "week"
) -> SkillAnalytics:
    """Each skill's use, most used first; `actionCalls` counts its actions in the period."""
    return analytics.skill_analytics(request.app.state.runtime, db, agent, period)


@router.get(
    "/agents/{id}/analytics/llm",
    operation_id="getLlmAnalytics",
    response_model=LlmAnalytics,
    responses=error_responses(400, 404),
)
def get_llm_analytics(
    agent: AgentDep,
    db: DatabaseDep,
    period: Literal["last_hour", "last_day", "last_week", "last_month", "all"] = "last_week",
    group_by: Annotated[
        Literal["model", "purpose", "task_type", "complexity"], Query(alias="groupBy")
    ] = "model",
) -> LlmAnalytics:
    """Seed 001's LLM usage analysis: per model and purpose, with recommendations."""
    return analytics.llm_analysis(db, agent, period=period, group_by=group_by)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
    app.include_router(charts.router)
