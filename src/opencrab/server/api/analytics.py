"""Analytics (seed 001 `/api/agents/{id}/analytics/usage|skills|llm`).

- usage: what the agent did in a period: sessions, messages, log lines by type, actions
  by name with failures, heartbeat decisions, LLM calls and cost, workspace size;
- skills: each skill's use (counted when one of its actions runs), effectiveness and
  how often its actions ran in the period;
- llm: seed 001's `LlmUsageAnalysis` (per model, per purpose, recommendations).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, FastAPI, Query, Request

from opencrab.core.workspace import Workspace
from opencrab.llm.analysis import analyze_usage
from opencrab.llm.metrics import period_start
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep, DatabaseDep, SettingsDep
from opencrab.server.schemas import ApiModel, Period, error_responses
from opencrab.store.tables import heartbeat_log, memory_sessions, messages, sessions
from opencrab.store.tables import llm_usage_metrics as metrics_table

router = APIRouter(prefix="/api", tags=["Analytics"])


class ActionUse(ApiModel):
    name: str
    calls: int
    failures: int


class LlmTotals(ApiModel):
    calls: int
    errors: int
    total_tokens: int
    cost_usd: float


class WorkspaceTotals(ApiModel):
    files: int
    bytes: int


class UsageAnalytics(ApiModel):
    period: str
    since: datetime | None
    sessions: int
    messages: dict[str, int]
    logs: dict[str, int]
    actions: list[ActionUse]
    heartbeats: dict[str, int]
    llm: LlmTotals
    workspace: WorkspaceTotals


class SkillUse(ApiModel):
    id: str
    name: str
    source: str
    is_active: bool
    version: int
    usage_count: int
    effectiveness: float | None
    last_used_at: datetime | None
    action_calls: int


class SkillAnalytics(ApiModel):
    period: str
    skills: list[SkillUse]


class ModelStats(ApiModel):
    usage_count: int
    total_cost: float
    avg_latency: int
    avg_quality: float | None
    success_rate: float
    evaluated: int
    avg_cost: float
    total_tokens: int


class RecommendationResponse(ApiModel):
    category: str
    current: str
    suggestion: str
    expected_improvement: str
    confidence: float


class LlmAnalytics(ApiModel):
    period: str
    calls: int
    total_cost: float
    total_tokens: int
    avg_latency: int
    avg_quality: float | None
    by_model: dict[str, ModelStats]
    by_purpose: dict[str, ModelStats]
    group_by: str
    by_group: dict[str, ModelStats]
    cost_efficiency: float | None
    quality_by_model: dict[str, float]
    recommendations: list[RecommendationResponse]


def _action_counts(conn: sa.Connection, agent_id: str, since: datetime | None) -> list[ActionUse]:
    m = memory_sessions.c
    query = sa.select(m.metadata_json).where(m.agent_id == agent_id, m.log_type == "action")
    if since is not None:
        query = query.where(m.created_at >= since)
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for (meta,) in conn.execute(query):
        if not isinstance(meta, dict) or not isinstance(meta.get("action"), str):
            continue
        calls[meta["action"]] += 1
        if meta.get("success") is False:
            failures[meta["action"]] += 1
    return [
        ActionUse(name=name, calls=n, failures=failures[name]) for name, n in calls.most_common()
    ]


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
    since = period_start(period)
    s, msg, m, h, x = (
        sessions.c,
        messages.c,
        memory_sessions.c,
        heartbeat_log.c,
        metrics_table.c,
    )

    def after(column: Any) -> Any:
        return sa.true() if since is None else column >= since

    with db.read() as conn:
        session_count = conn.execute(
            sa.select(sa.func.count(sa.distinct(m.session_id))).where(
                m.agent_id == agent.id, after(m.created_at)
            )
        ).scalar_one()
        by_role = conn.execute(
            sa.select(msg.role, sa.func.count())
            .join(sessions, s.id == msg.session_id)
            .where(s.agent_id == agent.id, after(msg.timestamp))
            .group_by(msg.role)
        ).all()
        by_type = conn.execute(
            sa.select(m.log_type, sa.func.count())
            .where(m.agent_id == agent.id, after(m.created_at))
            .group_by(m.log_type)
        ).all()
        beats = conn.execute(
            sa.select(h.decision, sa.func.count())
            .where(h.agent_id == agent.id, after(h.created_at))
            .group_by(h.decision)
        ).all()
        llm = conn.execute(
            sa.select(
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(sa.case((x.status == "ok", 0), else_=1)), 0),
                sa.func.coalesce(sa.func.sum(x.total_tokens), 0),
                sa.func.coalesce(sa.func.sum(x.estimated_cost_usd), 0.0),
            ).where(x.agent_id == agent.id, after(x.timestamp))
        ).one()
        actions = _action_counts(conn, agent.id, since)
    files = list(Workspace.for_agent(settings, agent.id).walk())
    return UsageAnalytics(
        period=period,
        since=since,
        sessions=int(session_count),
        messages={str(role): int(n) for role, n in by_role},
        logs={str(kind): int(n) for kind, n in by_type},
        actions=actions,
        heartbeats={str(decision): int(n) for decision, n in beats},
        llm=LlmTotals(
            calls=int(llm[0]),
            errors=int(llm[1]),
            total_tokens=int(llm[2]),
            cost_usd=round(float(llm[3]), 8),
        ),
        workspace=WorkspaceTotals(files=len(files), bytes=sum(f.size for f in files)),
    )


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
    since = period_start(period)
    skills = request.app.state.runtime.engine.skills_for(agent).list()
    with db.read() as conn:
        calls = {a.name: a.calls for a in _action_counts(conn, agent.id, since)}
    rows = [
        SkillUse(
            id=skill.id,
            name=skill.name,
            source=skill.source,
            is_active=skill.is_active,
            version=skill.version,
            usage_count=skill.usage_count,
            effectiveness=skill.effectiveness,
            last_used_at=skill.last_used_at,
            action_calls=sum(calls.get(action, 0) for action in skill.actions),
        )
        for skill in skills
    ]
    rows.sort(key=lambda r: (-r.usage_count, -r.action_calls, r.name))
    return SkillAnalytics(period=period, skills=rows)


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
    analysis = analyze_usage(db, agent.id, period=period, group_by=group_by)
    data = analysis.as_json()
    data.pop("note", None)
    return LlmAnalytics.model_validate(data)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
