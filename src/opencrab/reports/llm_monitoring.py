"""LLM monitoring (seed 001 "LLMモニタリング"): calls, errors and error rate, tokens,
cost and response times per provider over a period. The totals are the provider groups
of reports.llm_metrics (one computation of a group's figures); the latency percentiles
come from opencrab.store.repositories.llm_monitoring."""

from __future__ import annotations

from opencrab.llm.metrics import period_start
from opencrab.reports.llm_metrics import read_usage_groups
from opencrab.reports.model import ApiModel
from opencrab.store import Database
from opencrab.store.repositories import llm_monitoring


class ProviderUsage(ApiModel):
    provider: str
    calls: int
    errors: int
    error_rate: float
    input_tokens: int
    output_tokens: int
    cost_usd: float
    avg_latency_ms: float | None = None
    p50_latency_ms: int | None = None
    p95_latency_ms: int | None = None
    max_latency_ms: int | None = None
    avg_ttft_ms: float | None = None


class Monitoring(ApiModel):
    period: str
    providers: list[ProviderUsage]
    calls: int
    errors: int
    error_rate: float
    cost_usd: float


def monitoring(db: Database, period: str) -> Monitoring:
    """Usage, response times, error rate and cost per provider over `period`."""
    since = period_start(period)
    with db.read() as conn:
        groups = read_usage_groups(conn, "provider", since=since, agent_id=None)
        latency = llm_monitoring.latency_stats(conn, since=since)
    rows = []
    for g in groups:
        stats = latency.get(g.key or "")
        rows.append(
            ProviderUsage(
                provider=g.key or "",
                calls=g.calls,
                errors=g.errors,
                error_rate=round(g.errors / g.calls, 4) if g.calls else 0.0,
                input_tokens=g.input_tokens,
                output_tokens=g.output_tokens,
                cost_usd=g.cost_usd,
                avg_latency_ms=g.avg_latency_ms,
                p50_latency_ms=stats.p50_ms if stats else None,
                p95_latency_ms=stats.p95_ms if stats else None,
                max_latency_ms=stats.max_ms if stats else None,
                avg_ttft_ms=g.avg_ttft_ms,
            )
        )
    calls, errors = sum(r.calls for r in rows), sum(r.errors for r in rows)
    return Monitoring(
        period=period,
        providers=rows,
        calls=calls,
        errors=errors,
        error_rate=round(errors / calls, 4) if calls else 0.0,
        cost_usd=round(sum(r.cost_usd for r in rows), 8),
    )
