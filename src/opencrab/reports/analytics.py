"""One agent's analytics (seed 001 `/api/agents/{id}/analytics/usage|skills|llm`):
- usage: what the agent did in a period: sessions, messages, log lines by type, actions
  by name with failures, heartbeat decisions, LLM calls and cost, workspace size;
- skills: each skill's use (counted when one of its actions runs), effectiveness and
  how often its actions ran in the period;
- llm: seed 001's `LlmUsageAnalysis` (per model, per purpose, recommendations).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from sqlalchemy.engine import Connection

from opencrab.config import Settings
from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.workspace import Workspace
from opencrab.llm.analysis import analyze_usage
from opencrab.llm.metrics import period_start
from opencrab.reports.model import ApiModel
from opencrab.store import Database
from opencrab.store.repositories import activity
from opencrab.store.repositories import metrics as metrics_repo


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


def _action_counts(conn: Connection, agent_id: str, since: datetime | None) -> list[ActionUse]:
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for meta in activity.action_metadata(conn, agent_id, since=since):
        if not isinstance(meta, dict) or not isinstance(meta.get("action"), str):
            continue
        calls[meta["action"]] += 1
        if meta.get("success") is False:
            failures[meta["action"]] += 1
    return [
        ActionUse(name=name, calls=n, failures=failures[name]) for name, n in calls.most_common()
    ]


def usage_analytics(db: Database, settings: Settings, agent: Agent, period: str) -> UsageAnalytics:
    """What the agent did in the period."""
    since = period_start(period)
    with db.read() as conn:
        session_count = activity.session_count(conn, agent.id, since=since)
        by_role = activity.message_counts(conn, agent.id, since=since)
        by_type = activity.log_counts(conn, agent.id, since=since)
        beats = activity.heartbeat_counts(conn, agent.id, since=since)
        llm = metrics_repo.agent_totals(conn, agent.id, since=since)
        actions = _action_counts(conn, agent.id, since)
    files = list(Workspace.for_agent(settings, agent.id).walk())
    return UsageAnalytics(
        period=period,
        since=since,
        sessions=session_count,
        messages=by_role,
        logs=by_type,
        actions=actions,
        heartbeats=beats,
        llm=LlmTotals(
            calls=llm.calls,
            errors=llm.errors,
            total_tokens=llm.total_tokens,
            cost_usd=round(llm.cost_usd, 8),
        ),
        workspace=WorkspaceTotals(files=len(files), bytes=sum(f.size for f in files)),
    )


def skill_analytics(runtime: Runtime, db: Database, agent: Agent, period: str) -> SkillAnalytics:
    """The agent's skills by use, most used first, with their actions' calls in `period`
    (the route's answer and the dashboard's table)."""
    since = period_start(period)
    skills = runtime.engine.skills_for(agent).list()
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


def llm_analysis(db: Database, agent: Agent, *, period: str, group_by: str) -> LlmAnalytics:
    """Seed 001's LLM usage analysis of the agent: per model and purpose, with
    recommendations (opencrab.llm.analysis)."""
    analysis = analyze_usage(db, agent.id, period=period, group_by=group_by)
    data = analysis.as_json()
    data.pop("note", None)
    return LlmAnalytics.model_validate(data)
