"""An agent's LLM call records and their totals per group (seed 001's
`/api/agents/{id}/llm/metrics[/summary]`, `opencrab llm metrics`): one row of
`llm_usage_metrics` per call attempt, and the repository's grouped totals as `UsageGroup`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import field_validator
from sqlalchemy.engine import Connection

from opencrab.errors import ValidationError
from opencrab.llm.metrics import GROUPS, period_start
from opencrab.reports.model import ApiModel
from opencrab.store import Database
from opencrab.store.repositories import agents as agents_repo
from opencrab.store.repositories import metrics as metrics_repo

GroupBy = Literal["model", "provider", "purpose", "task_type", "agent", "day", "week"]
assert set(GroupBy.__args__) == set(GROUPS)  # type: ignore[attr-defined]


class CallRecordResponse(ApiModel):
    id: str
    timestamp: datetime
    session_id: str | None = None
    provider: str
    model: str
    purpose: str
    task_type: str | None = None
    status: str
    error_type: str | None = None
    error: str | None = None
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    reasoning_tokens: int
    cost_usd: float
    cost_source: str
    latency_ms: int
    time_to_first_token_ms: int | None = None
    quality_score: float | None = None


# Totals of one group of calls, validated from the repository's GroupTotals row (costs to 8
# decimals, mean times to 1). No docstring: it would become the schema's description.
class UsageGroup(ApiModel):
    key: str | None
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float
    avg_latency_ms: float | None
    avg_ttft_ms: float | None
    avg_quality: float | None

    @field_validator("cost_usd")
    @classmethod
    def _cost(cls, value: float) -> float:
        return round(value, 8)

    @field_validator("avg_latency_ms", "avg_ttft_ms")
    @classmethod
    def _millis(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 1)


class MetricsSummary(ApiModel):
    period: str
    group_by: str
    total: UsageGroup
    groups: list[UsageGroup]


def call_records(
    db: Database, agent_id: str, *, period: str, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The agent's LLM calls in `period`, newest first (one per attempt)."""
    since = period_start(period)
    with db.read() as conn:
        rows = metrics_repo.agent_calls(
            conn, agent_id, since=since, newest_first=True, limit=limit, offset=offset
        )
    return [
        {
            "id": str(r.id),
            "timestamp": r.timestamp,
            "session_id": r.session_id,
            "provider": r.provider,
            "model": r.model,
            "purpose": r.purpose,
            "task_type": r.task_type,
            "status": r.status,
            "error_type": r.error_type,
            "error": r.error,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "total_tokens": r.total_tokens,
            "cache_read_tokens": r.cache_read_tokens,
            "reasoning_tokens": r.reasoning_tokens,
            "cost_usd": r.estimated_cost_usd,
            "cost_source": r.cost_source,
            "latency_ms": r.latency_ms,
            "time_to_first_token_ms": r.time_to_first_token_ms,
            "quality_score": r.quality_score,
        }
        for r in rows
    ]


def usage_groups(
    db: Database,
    *,
    group_by: str = "model",
    since: datetime | None = None,
    agent_id: str | None = None,
) -> list[UsageGroup]:
    """Calls, errors, tokens, cost and speed per group, most expensive first."""
    return [
        group
        for group, _ in named_usage_groups(db, group_by=group_by, since=since, agent_id=agent_id)
    ]


def named_usage_groups(
    db: Database,
    *,
    group_by: str = "model",
    since: datetime | None = None,
    agent_id: str | None = None,
) -> list[tuple[UsageGroup, str | None]]:
    """`usage_groups`, each with the agent's name when grouped by agent (else None)."""
    with db.read() as conn:
        groups = read_usage_groups(conn, group_by, since=since, agent_id=agent_id)
        names = agents_repo.agent_names(conn) if group_by == "agent" else {}
    return [(g, names.get(str(g.key), (None,))[0]) for g in groups]


def read_usage_groups(
    conn: Connection, group_by: str, *, since: datetime | None, agent_id: str | None
) -> list[UsageGroup]:
    """The groups inside a transaction a report holds (reports.llm_monitoring)."""
    if group_by not in GROUPS:
        raise ValidationError(f"unknown grouping {group_by!r}: use one of {', '.join(GROUPS)}")
    rows = metrics_repo.group_totals(conn, group_by, since=since, agent_id=agent_id)
    return [UsageGroup.model_validate(r._asdict()) for r in rows]


def metrics_summary(db: Database, agent_id: str, *, period: str, group_by: str) -> MetricsSummary:
    """The agent's calls, errors, tokens, cost and latency per group, most expensive first,
    with their totals."""
    groups = usage_groups(db, group_by=group_by, since=period_start(period), agent_id=agent_id)
    return MetricsSummary(period=period, group_by=group_by, total=_total(groups), groups=groups)


def _total(groups: list[UsageGroup]) -> UsageGroup:
    calls = sum(g.calls for g in groups)

    def mean(field: str) -> float | None:
        """The groups' averages weighted by their calls (latency: by successful calls)."""
        pairs = [
            (getattr(g, field), g.calls - g.errors if field == "avg_latency_ms" else g.calls)
            for g in groups
            if getattr(g, field) is not None
        ]
        weight = sum(n for _, n in pairs)
        return round(sum(v * n for v, n in pairs) / weight, 1) if weight else None

    return UsageGroup(
        key=None,
        calls=calls,
        errors=sum(g.errors for g in groups),
        input_tokens=sum(g.input_tokens for g in groups),
        output_tokens=sum(g.output_tokens for g in groups),
        total_tokens=sum(g.total_tokens for g in groups),
        cost_usd=round(sum(g.cost_usd for g in groups), 8),
        avg_latency_ms=mean("avg_latency_ms"),
        avg_ttft_ms=mean("avg_ttft_ms"),
        avg_quality=mean("avg_quality"),
    )
