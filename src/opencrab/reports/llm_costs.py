"""The fleet's LLM cost and quality figures (issue 21 point 2), each from one grouped
query of opencrab.store.repositories.llm_analytics over the shared filter
(reports/llm_filter.py): totals, cost over time, shares, quality over time, the
cost-efficiency map, speed percentiles, error rates, cache savings and model suggestions.
`/api/analytics/llm/*`, the Costs page and the export all call these functions, so the
page, the JSON and the CSV never disagree.
"""

from __future__ import annotations

from typing import Any

from opencrab.actions.llm import SELECTABLE_PURPOSES
from opencrab.core.runtime import Runtime
from opencrab.llm.analysis import Stats, optimize_fleet
from opencrab.llm.pricing import PriceBook
from opencrab.reports.llm_filter import Filter, agent_names, filter_echo
from opencrab.reports.model import ApiModel
from opencrab.store import Database
from opencrab.store.repositories import agents as agents_repo
from opencrab.store.repositories import llm_analytics as repo
from opencrab.store.repositories.llm_analytics import Bucket, Stack, UsageFilter
from opencrab.store.repositories.metrics_speed import PERCENTILE_ERROR


class Totals(ApiModel):
    filter: Filter
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    cost_usd: float


class CostPoint(ApiModel):
    bucket: str
    key: str
    label: str
    cost_usd: float
    calls: int


class CostSeries(ApiModel):
    filter: Filter
    bucket: Bucket
    stack: Stack
    points: list[CostPoint]


class ShareRow(ApiModel):
    key: str
    label: str
    calls: int
    cost_usd: float
    total_tokens: int


class Shares(ApiModel):
    filter: Filter
    by: Stack
    shares: list[ShareRow]


class QualityRow(ApiModel):
    bucket: str
    avg_quality: float
    rated: int


class QualitySeries(ApiModel):
    filter: Filter
    bucket: Bucket
    points: list[QualityRow]


class EfficiencyRow(ApiModel):
    model: str
    task_type: str
    calls: int
    cost_usd: float
    cost_per_call: float
    avg_quality: float | None
    rated: int


class EfficiencyMap(ApiModel):
    filter: Filter
    cells: list[EfficiencyRow]


class SpeedRow(ApiModel):
    model: str
    calls: int
    latency_p50: int | None
    latency_p90: int | None
    latency_p99: int | None
    ttft_p50: int | None
    ttft_p90: int | None
    ttft_p99: int | None


class SpeedTable(ApiModel):
    filter: Filter
    models: list[SpeedRow]


class ErrorRow(ApiModel):
    provider: str
    calls: int
    errors: int
    error_rate: float


class ErrorTable(ApiModel):
    filter: Filter
    providers: list[ErrorRow]


class CacheRow(ApiModel):
    provider: str
    model: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    cached_share: float
    saved_usd: float
    priced: bool


class CacheReport(ApiModel):
    filter: Filter
    input_tokens: int
    cached_tokens: int
    cached_share: float
    saved_usd: float
    models: list[CacheRow]


class Evidence(ApiModel):
    """A suggestion's evidence: llm.analysis `Stats` of the agent's calls of one model
    over the last month (avg_latency: the mean of the calls that returned; success_rate:
    returned and not rated a failed task), not the page's fleet figures."""

    model: str
    calls: int
    avg_cost: float
    avg_quality: float | None
    avg_latency: int
    success_rate: float


class Suggestion(ApiModel):
    agent_id: str
    agent: str
    task_type: str
    purpose: str
    current_model: str | None
    suggested_model: str
    reason: str
    expected_improvement: str
    current: Evidence
    suggested: Evidence


class Suggestions(ApiModel):
    filter: Filter
    goal: str
    suggestions: list[Suggestion]


def totals_of(flt: UsageFilter, rows: list[repo.ModelRollup]) -> Totals:
    """The totals of a rollup (sums over its provider/model rows)."""
    return Totals(
        filter=filter_echo(flt),
        calls=sum(r.calls for r in rows),
        errors=sum(r.errors for r in rows),
        input_tokens=sum(r.input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
        total_tokens=sum(r.total_tokens for r in rows),
        cached_tokens=sum(r.cache_read_tokens for r in rows),
        cache_write_tokens=sum(r.cache_write_tokens for r in rows),
        cost_usd=sum(r.cost_usd for r in rows),
    )


def totals_report(db: Database, flt: UsageFilter) -> Totals:
    """Sums over the filtered calls."""
    with db.read() as conn:
        return totals_of(flt, repo.rollup(conn, flt))


def cost_report(db: Database, flt: UsageFilter, bucket: Bucket, stack: Stack) -> CostSeries:
    """Cost per day or week, stacked by model, provider, agent or purpose."""
    with db.read() as conn:
        points = repo.cost_series(conn, flt, bucket=bucket, stack=stack)
    names = agent_names(db) if stack == "agent" else {}
    return CostSeries(
        filter=filter_echo(flt),
        bucket=bucket,
        stack=stack,
        points=[
            CostPoint(
                bucket=p.bucket,
                key=p.key,
                label=names.get(p.key, p.key),
                cost_usd=p.cost_usd,
                calls=p.calls,
            )
            for p in points
        ],
    )


def model_shares(flt: UsageFilter, rows: list[repo.ModelRollup]) -> Shares:
    """Each model's part of calls and cost, from a rollup, most expensive first."""
    merged: dict[str, repo.Share] = {}
    for r in rows:
        had = merged.get(r.model, repo.Share(r.model, 0, 0.0, 0))
        merged[r.model] = repo.Share(
            r.model,
            had.calls + r.calls,
            had.cost_usd + r.cost_usd,
            had.total_tokens + r.total_tokens,
        )
    ordered = sorted(merged.values(), key=lambda s: (-s.cost_usd, s.key))
    return Shares(
        filter=filter_echo(flt),
        by="model",
        shares=[
            ShareRow(
                key=r.key,
                label=r.key,
                calls=r.calls,
                cost_usd=r.cost_usd,
                total_tokens=r.total_tokens,
            )
            for r in ordered
        ],
    )


def share_report(db: Database, flt: UsageFilter, by: Stack) -> Shares:
    """Each model's (provider's, agent's, purpose's) part of calls and cost."""
    with db.read() as conn:
        if by == "model":
            return model_shares(flt, repo.rollup(conn, flt))
        rows = repo.shares(conn, flt, by=by)
    names = agent_names(db) if by == "agent" else {}
    return Shares(
        filter=filter_echo(flt),
        by=by,
        shares=[
            ShareRow(
                key=r.key,
                label=names.get(r.key, r.key),
                calls=r.calls,
                cost_usd=r.cost_usd,
                total_tokens=r.total_tokens,
            )
            for r in rows
        ],
    )


def quality_report(db: Database, flt: UsageFilter, bucket: Bucket) -> QualitySeries:
    """Average evaluate_response quality of the rated calls per day or week."""
    with db.read() as conn:
        rows = repo.quality_series(conn, flt, bucket=bucket)
    return QualitySeries(
        filter=filter_echo(flt),
        bucket=bucket,
        points=[
            QualityRow(bucket=r.bucket, avg_quality=r.avg_quality, rated=r.rated) for r in rows
        ],
    )


def efficiency_report(db: Database, flt: UsageFilter) -> EfficiencyMap:
    """Model × task type: cost per call and average quality."""
    with db.read() as conn:
        cells = repo.efficiency(conn, flt)
    return EfficiencyMap(
        filter=filter_echo(flt),
        cells=[
            EfficiencyRow(
                model=c.model,
                task_type=c.task_type,
                calls=c.calls,
                cost_usd=c.cost_usd,
                cost_per_call=c.cost_usd / c.calls,
                avg_quality=c.avg_quality,
                rated=c.rated,
            )
            for c in cells
        ],
    )


def speed_report(db: Database, flt: UsageFilter) -> SpeedTable:
    """Latency and TTFT p50/p90/p99 per model (successful calls)."""
    with db.read() as conn:
        rows = repo.speed(conn, flt)
    models = []
    for r in rows:
        lat = r.latency or (None, None, None)
        first = r.ttft or (None, None, None)
        models.append(
            SpeedRow(
                model=r.model,
                calls=r.calls,
                latency_p50=lat[0],
                latency_p90=lat[1],
                latency_p99=lat[2],
                ttft_p50=first[0],
                ttft_p90=first[1],
                ttft_p99=first[2],
            )
        )
    return SpeedTable(filter=filter_echo(flt), models=models)


def errors_of(flt: UsageFilter, rollup: list[repo.ModelRollup]) -> ErrorTable:
    """Calls, failed calls and the error rate per provider, from a rollup."""
    calls: dict[str, int] = {}
    errors: dict[str, int] = {}
    for r in rollup:
        calls[r.provider] = calls.get(r.provider, 0) + r.calls
        errors[r.provider] = errors.get(r.provider, 0) + r.errors
    rows = [repo.ErrorRate(p, calls[p], errors[p]) for p in sorted(calls)]
    return ErrorTable(
        filter=filter_echo(flt),
        providers=[
            ErrorRow(
                provider=r.provider, calls=r.calls, errors=r.errors, error_rate=r.errors / r.calls
            )
            for r in rows
        ],
    )


def error_report(db: Database, flt: UsageFilter) -> ErrorTable:
    """Calls, failed calls (status other than ok) and the error rate per provider."""
    with db.read() as conn:
        return errors_of(flt, repo.rollup(conn, flt))


def cache_report(db: Database, flt: UsageFilter) -> CacheReport:
    """Cached-token share, and what reading from a cache saved at the price table's rates.

    saved = cache read tokens × (input price − cache read price); a model without a price
    row (or without a cache read rate) saved nothing the table can show (`priced` false).
    """
    with db.read() as conn:
        return cache_of(flt, repo.rollup(conn, flt), PriceBook.load(conn))


def cache_of(flt: UsageFilter, rows: list[repo.ModelRollup], book: PriceBook) -> CacheReport:
    """Cached-token share and savings per provider/model, from a rollup."""
    models = []
    for r in rows:
        price = book.find(r.provider, r.model)
        saved = 0.0
        if price is not None and price.cache_read_price_per_1m is not None:
            rate = price.input_price_per_1m - price.cache_read_price_per_1m
            saved = r.cache_read_tokens * rate / 1_000_000
        models.append(
            CacheRow(
                provider=r.provider,
                model=r.model,
                input_tokens=r.input_tokens,
                cached_tokens=r.cache_read_tokens,
                cache_write_tokens=r.cache_write_tokens,
                cached_share=r.cache_read_tokens / r.input_tokens if r.input_tokens else 0.0,
                saved_usd=saved,
                priced=price is not None,
            )
        )
    inputs = sum(r.input_tokens for r in models)
    cached = sum(r.cached_tokens for r in models)
    return CacheReport(
        filter=filter_echo(flt),
        input_tokens=inputs,
        cached_tokens=cached,
        cached_share=cached / inputs if inputs else 0.0,
        saved_usd=sum(r.saved_usd for r in models),
        models=models,
    )


def _evidence(model: str, s: Stats) -> Evidence:
    return Evidence(
        model=model,
        calls=s.usage_count,
        avg_cost=s.avg_cost,
        avg_quality=s.avg_quality,
        avg_latency=s.avg_latency,
        success_rate=s.success_rate,
    )


def suggestions_report(runtime: Runtime, flt: UsageFilter, goal: str) -> Suggestions:
    """optimize_model_selection for the filtered agent (or each agent with calls), from
    one read of their sums (llm.analysis.optimize_fleet)."""
    db = runtime.db
    with db.read() as conn:
        agent_ids = (
            [flt.agent_id] if flt.agent_id else [s.key for s in repo.shares(conn, flt, by="agent")]
        )
        names = {k: v[0] for k, v in agents_repo.agent_names(conn).items()}
    configs = {a.id: a.llm_config for a in runtime.agents.list() if a.id in names}
    current: dict[str, dict[str, str | None]] = {}
    for agent_id in agent_ids:
        if agent_id not in configs:
            continue  # calls of "system" or of a deleted agent: nothing to configure
        models = configs[agent_id].models
        current[agent_id] = {}
        for purpose in SELECTABLE_PURPOSES:
            ref = getattr(models, purpose)
            current[agent_id][purpose] = None if ref is None else f"{ref.provider}/{ref.model}"
    found: list[Suggestion] = []
    for agent_id, result in optimize_fleet(db, current, goal=goal).items():
        for change in result.by_task.values():
            found.append(
                Suggestion(
                    agent_id=agent_id,
                    agent=names[agent_id],
                    task_type=change.task_type,
                    purpose=change.purpose,
                    current_model=change.current_model,
                    suggested_model=change.suggested_model,
                    reason=change.reason,
                    expected_improvement=change.expected_improvement,
                    current=_evidence(change.current_model or "(most used)", change.current),
                    suggested=_evidence(change.suggested_model, change.suggested),
                )
            )
    return Suggestions(filter=filter_echo(flt), goal=goal, suggestions=found)


def page_summary(db: Database, flt: UsageFilter) -> tuple[Totals, CacheReport, Shares, ErrorTable]:
    """The Costs page's server-rendered figures from one rollup query."""
    with db.read() as conn:
        rows = repo.rollup(conn, flt)
        book = PriceBook.load(conn)
    return (
        totals_of(flt, rows),
        cache_of(flt, rows, book),
        model_shares(flt, rows),
        errors_of(flt, rows),
    )


def percentile_note(*, filtered: bool = True) -> str:
    """What the pages say of their percentiles' accuracy (store/repositories/llm_analytics:
    exact up to EXACT_UP_TO calls, from the speed histograms within PERCENTILE_ERROR
    beyond)."""
    return (
        f"Over more than {repo.EXACT_UP_TO:,} calls the percentiles come from per-day "
        f"histograms: each within ±{PERCENTILE_ERROR * 100:g} % of the exact value. "
        + (
            "Fewer calls, or one agent's or purpose's, are ranked exactly."
            if filtered
            else "Fewer calls are ranked exactly; the slowest is exact."
        )
    )


def costs_page(db: Database, flt: UsageFilter) -> dict[str, Any]:
    """The Costs page's server-rendered figures and its filter bar's choices (the purposes
    and the agents, by name, that have calls)."""
    with db.read() as conn:
        choices = repo.choices(conn)
        names = agents_repo.agent_names(conn)
    totals, cache, share, errors = page_summary(db, flt)
    return {
        "totals": totals,
        "cache": cache,
        "share": share,
        "errors": errors,
        "percentile_note": percentile_note(),
        "purposes": choices["purposes"],
        "agents": sorted(
            ((agent_id, *names.get(agent_id, (agent_id, None))) for agent_id in choices["agents"]),
            key=lambda a: str(a[1]).lower(),
        ),
    }
