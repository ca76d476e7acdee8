"""LLM meta-analysis (seed 001 "LLMメタ分析・最適化システム"), computed from the metrics.

`analyze_usage` is seed `LlmUsageAnalysis`: totals, per-model and per-purpose stats,
cost efficiency, quality by model and recommendations with a confidence. `optimize`
is `optimize_model_selection`: for each task type (seed `TaskOptimization`: chat,
discussion, compaction, reflection, …; calls without one under their purpose), the model
the agent's own history says best meets a goal (minimize_cost, maximize_quality,
balance, minimize_latency) under a quality floor and a daily budget; the suggested
per-purpose configuration takes, for each purpose, its busiest task type's choice.
Every figure comes from `llm_usage_metrics` rows; with no data the answer says so
instead of inventing numbers.

Quality is the agent's own `evaluate_response` scores (0..1). Success is a call that
returned (status ok) and was not evaluated as a failed task.

These are one agent's figures, computed here and nowhere else. `analyze_usage` reads
its call rows (`metrics_repo.agent_calls`): it needs what the daily rollup
(`llm_usage_daily`) does not keep, each call's complexity (a grouping). `optimize` reads
their sums per task type, purpose and model (`metrics_repo.task_model_sums`): the
rollup's rows of the month's whole UTC days, which count the calls rated a failed task
too (for the success rate), and the calls of the part of a day before them — the same
figures as over the calls, so the same choices. The fleet's figures on the Costs page
and `/api/analytics/llm/*` (store/repositories/llm_analytics.py, published by
reports/llm_costs.py) are other measures, computed there and nowhere else: the error
count (status other than ok; the agent's own judgement of the task plays no part),
latency as nearest-rank percentiles (not a mean), quality per day or week and per model
× task type, and sums over a filter of whole UTC days read from the rollup. Two
definitions are shared and agree on the same
calls: cost is the sum of the calls' `estimated_cost_usd`, quality the mean score of the
rated calls. The model suggestions of the Costs page are this module's (`optimize`), so
their evidence (`Stats`) carries this module's success rate and mean latency.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from opencrab.errors import ValidationError
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo

PERIODS = {
    "last_hour": timedelta(hours=1),
    "last_day": timedelta(days=1),
    "last_week": timedelta(weeks=1),
    "last_month": timedelta(days=30),
}
GROUPINGS = ("model", "purpose", "task_type", "complexity")
GOALS = ("minimize_cost", "maximize_quality", "balance", "minimize_latency")
FULL_CONFIDENCE_SAMPLES = 20  # evaluated calls per model for a confidence of 1.0


@dataclass(frozen=True)
class Call:
    """One metrics row, as the analysis needs it."""

    provider: str
    model: str
    purpose: str
    task_type: str | None
    complexity: str | None
    total_tokens: int
    cost: float
    latency_ms: int
    ok: bool
    quality: float | None
    task_success: bool | None
    timestamp: datetime

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def succeeded(self) -> bool:
        return self.ok and self.task_success is not False


@dataclass
class Stats:
    """Seed `ModelStats` / `PurposeStats` for a group of calls (`stats_of`).

    usage_count: the calls (attempts); total_cost: the sum of their estimated_cost_usd,
    avg_cost that over usage_count; avg_latency: the mean latency_ms of the calls that
    returned (status ok), rounded to the ms (0 without any); avg_quality: the mean
    quality_score of the `evaluated` (rated) calls (None without any); success_rate: the
    share of calls that returned and were not rated a failed task (`Call.succeeded`);
    total_tokens: the sum of their total_tokens.
    """

    usage_count: int = 0
    total_cost: float = 0.0
    avg_latency: int = 0
    avg_quality: float | None = None
    success_rate: float = 0.0
    evaluated: int = 0
    avg_cost: float = 0.0
    total_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "usage_count": self.usage_count,
            "total_cost": round(self.total_cost, 8),
            "avg_latency": self.avg_latency,
            "avg_quality": None if self.avg_quality is None else round(self.avg_quality, 4),
            "success_rate": round(self.success_rate, 4),
            "evaluated": self.evaluated,
            "avg_cost": round(self.avg_cost, 8),
            "total_tokens": self.total_tokens,
        }


def stats_of(calls: Sequence[Call]) -> Stats:
    if not calls:
        return Stats()
    ok = [c for c in calls if c.ok]
    rated = [c.quality for c in calls if c.quality is not None]
    cost = sum(c.cost for c in calls)
    return Stats(
        usage_count=len(calls),
        total_cost=cost,
        avg_latency=round(sum(c.latency_ms for c in ok) / len(ok)) if ok else 0,
        avg_quality=sum(rated) / len(rated) if rated else None,
        success_rate=sum(1 for c in calls if c.succeeded) / len(calls),
        evaluated=len(rated),
        avg_cost=cost / len(calls),
        total_tokens=sum(c.total_tokens for c in calls),
    )


@dataclass
class Recommendation:
    """Seed `Recommendation`."""

    category: str  # cost, quality, latency, reliability
    current: str
    suggestion: str
    expected_improvement: str
    confidence: float

    def as_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "current": self.current,
            "suggestion": self.suggestion,
            "expected_improvement": self.expected_improvement,
            "confidence": round(self.confidence, 2),
        }


@dataclass
class UsageAnalysis:
    """Seed `LlmUsageAnalysis`."""

    period: str
    calls: int
    total_cost: float
    total_tokens: int
    avg_latency: int
    avg_quality: float | None
    by_model: dict[str, Stats]
    by_purpose: dict[str, Stats]
    by_group: dict[str, Stats]
    group_by: str
    cost_efficiency: float | None
    quality_by_model: dict[str, float]
    recommendations: list[Recommendation] = field(default_factory=list)

    def as_json(self, focus: str = "all") -> dict[str, Any]:
        data: dict[str, Any] = {
            "period": self.period,
            "calls": self.calls,
            "total_cost": round(self.total_cost, 8),
            "total_tokens": self.total_tokens,
            "avg_latency": self.avg_latency,
            "avg_quality": None if self.avg_quality is None else round(self.avg_quality, 4),
            "by_model": {k: v.as_json() for k, v in self.by_model.items()},
            "by_purpose": {k: v.as_json() for k, v in self.by_purpose.items()},
            "group_by": self.group_by,
            "by_group": {k: v.as_json() for k, v in self.by_group.items()},
            "cost_efficiency": self.cost_efficiency,
            "quality_by_model": {k: round(v, 4) for k, v in self.quality_by_model.items()},
            "recommendations": [
                r.as_json()
                for r in self.recommendations
                if focus in ("all", "efficiency") or r.category == focus
            ],
        }
        if self.calls == 0:
            data["note"] = "no LLM calls recorded for this agent in the period"
        return data


def since_for(period: str, now: datetime | None = None) -> datetime | None:
    """Start of `last_hour|last_day|last_week|last_month`; None for `all`."""
    if period == "all":
        return None
    if period not in PERIODS:
        raise ValidationError(f"unknown period {period!r}: use {', '.join([*PERIODS, 'all'])}")
    return (now or datetime.now(UTC)) - PERIODS[period]


def load_calls(db: Database, agent_id: str, *, since: datetime | None = None) -> list[Call]:
    """The agent's metrics rows since `since` (all when None)."""
    with db.read() as conn:
        rows = metrics_repo.agent_calls(conn, agent_id, since=since)
    return [
        Call(
            provider=r.provider,
            model=r.model,
            purpose=r.purpose,
            task_type=r.task_type,
            complexity=r.complexity,
            total_tokens=int(r.total_tokens),
            cost=float(r.estimated_cost_usd),
            latency_ms=int(r.latency_ms),
            ok=r.status == "ok",
            quality=None if r.quality_score is None else float(r.quality_score),
            task_success=None if r.task_success is None else bool(r.task_success),
            timestamp=r.timestamp,
        )
        for r in rows
    ]


def _group(calls: Iterable[Call], key: str) -> dict[str, list[Call]]:
    groups: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        value = call.ref if key == "model" else getattr(call, key)
        groups[str(value) if value is not None else "(none)"].append(call)
    return dict(groups)


def analyze_usage(
    db: Database,
    agent_id: str,
    *,
    period: str = "last_week",
    group_by: str = "model",
    now: datetime | None = None,
) -> UsageAnalysis:
    """The agent's LLM usage in the period, with recommendations."""
    if group_by not in GROUPINGS:
        raise ValidationError(f"unknown grouping {group_by!r}: use {', '.join(GROUPINGS)}")
    calls = load_calls(db, agent_id, since=since_for(period, now))
    overall = stats_of(calls)
    by_model = {k: stats_of(v) for k, v in _group(calls, "model").items()}
    quality_by_model = {k: s.avg_quality for k, s in by_model.items() if s.avg_quality is not None}
    efficiency = None
    if overall.avg_quality is not None and overall.avg_cost > 0:
        efficiency = round(overall.avg_quality / overall.avg_cost, 4)
    return UsageAnalysis(
        period=period,
        calls=overall.usage_count,
        total_cost=overall.total_cost,
        total_tokens=overall.total_tokens,
        avg_latency=overall.avg_latency,
        avg_quality=overall.avg_quality,
        by_model=by_model,
        by_purpose={k: stats_of(v) for k, v in _group(calls, "purpose").items()},
        by_group={k: stats_of(v) for k, v in _group(calls, group_by).items()},
        group_by=group_by,
        cost_efficiency=efficiency,
        quality_by_model=quality_by_model,
        recommendations=recommend(calls),
    )


def _confidence(*samples: int) -> float:
    return min(1.0, min(samples) / FULL_CONFIDENCE_SAMPLES) if samples else 0.0


def recommend(calls: Sequence[Call], *, min_quality: float = 0.7) -> list[Recommendation]:
    """Data-backed suggestions per purpose: cheaper equal models, better models, speed."""
    found: list[Recommendation] = []
    for purpose, group in sorted(_group(calls, "purpose").items()):
        models = {ref: stats_of(cs) for ref, cs in _group(group, "model").items()}
        main_ref, main = max(models.items(), key=lambda kv: kv[1].usage_count)
        for ref, other in models.items():
            if ref == main_ref:
                continue
            both_rated = main.avg_quality is not None and other.avg_quality is not None
            if both_rated and main.avg_cost > 0:
                assert main.avg_quality is not None
                assert other.avg_quality is not None
                saving = 1 - other.avg_cost / main.avg_cost
                if other.avg_quality >= main.avg_quality - 0.05 and saving >= 0.2:
                    found.append(
                        Recommendation(
                            category="cost",
                            current=f"{purpose}: {main_ref} at ${main.avg_cost:.6f}/call, "
                            f"quality {main.avg_quality:.2f}",
                            suggestion=f"use {ref} for {purpose}",
                            expected_improvement=f"{saving:.0%} lower cost at quality "
                            f"{other.avg_quality:.2f}",
                            confidence=_confidence(main.evaluated, other.evaluated),
                        )
                    )
                if other.avg_quality >= main.avg_quality + 0.1 and other.avg_quality >= min_quality:
                    found.append(
                        Recommendation(
                            category="quality",
                            current=f"{purpose}: {main_ref} quality {main.avg_quality:.2f}",
                            suggestion=f"use {ref} for {purpose}",
                            expected_improvement=f"quality {main.avg_quality:.2f} → "
                            f"{other.avg_quality:.2f}",
                            confidence=_confidence(main.evaluated, other.evaluated),
                        )
                    )
            if (
                other.avg_latency
                and main.avg_latency > 2 * other.avg_latency
                and (not both_rated or (other.avg_quality or 0) >= (main.avg_quality or 0) - 0.05)
            ):
                found.append(
                    Recommendation(
                        category="latency",
                        current=f"{purpose}: {main_ref} averages {main.avg_latency} ms",
                        suggestion=f"use {ref} for {purpose} when speed matters",
                        expected_improvement=f"{main.avg_latency} ms → {other.avg_latency} ms",
                        confidence=_confidence(main.usage_count, other.usage_count),
                    )
                )
        if main.usage_count >= 5 and main.success_rate < 0.9:
            found.append(
                Recommendation(
                    category="reliability",
                    current=f"{purpose}: {main_ref} succeeds in {main.success_rate:.0%} of calls",
                    suggestion="add a fallback or choose another model for this purpose",
                    expected_improvement="fewer failed calls",
                    confidence=_confidence(main.usage_count),
                )
            )
        if main.avg_quality is not None and main.avg_quality < min_quality and len(models) == 1:
            found.append(
                Recommendation(
                    category="quality",
                    current=f"{purpose}: {main_ref} quality {main.avg_quality:.2f} is below "
                    f"{min_quality:.2f}",
                    suggestion=f"try a stronger model (e.g. the smart or reasoning alias) for "
                    f"{purpose} and evaluate it",
                    expected_improvement="quality above the threshold",
                    confidence=_confidence(main.evaluated) * 0.5,
                )
            )
    return sorted(found, key=lambda r: -r.confidence)


@dataclass
class TaskOptimization:
    """Seed `TaskOptimization`: one task type's suggested model (its calls' purpose too)."""

    task_type: str
    purpose: str
    current_model: str | None
    suggested_model: str
    reason: str
    expected_improvement: str
    current: Stats
    suggested: Stats

    def as_json(self) -> dict[str, Any]:
        return {
            "task_type": self.task_type,
            "purpose": self.purpose,
            "current_model": self.current_model,
            "suggested_model": self.suggested_model,
            "reason": self.reason,
            "expected_improvement": self.expected_improvement,
        }


@dataclass
class Optimization:
    """Seed `OptimizationResult`: what to change and what it should bring."""

    goal: str
    by_task: dict[str, TaskOptimization]
    expected_cost_reduction: float | None  # fraction of the current cost
    expected_quality_change: float | None  # difference in average quality
    calls_considered: int

    def by_purpose(self) -> dict[str, TaskOptimization]:
        """The change per purpose: that of the purpose's busiest task type."""
        chosen: dict[str, TaskOptimization] = {}
        for change in self.by_task.values():
            known = chosen.get(change.purpose)
            if known is None or change.current.usage_count > known.current.usage_count:
                chosen[change.purpose] = change
        return chosen


def optimize(
    db: Database,
    agent_id: str,
    current: dict[str, str | None],
    *,
    goal: str = "balance",
    budget_limit_usd: float | None = None,
    min_quality: float = 0.7,
    now: datetime | None = None,
) -> Optimization:
    """Best model per task type over the last month for `goal`.

    `current` maps purpose → "provider/model" now configured (None: the default); a task
    type's current model is that of its calls' (most common) purpose. A model qualifies
    for a task type when it has calls for it, meets `min_quality` (when rated) and, with
    a budget, its projected daily cost for that task type fits.
    """
    _check(goal, min_quality)
    now = now or datetime.now(UTC)
    since = now - PERIODS["last_month"]
    first = None
    with db.read() as conn:
        sums = metrics_repo.task_model_sums(conn, agent_id, since=since)
        if sums and budget_limit_usd is not None:  # the calls per day weigh the budget
            first = metrics_repo.first_call(conn, agent_id, since=since)
    return _choose(sums, current, goal, budget_limit_usd, min_quality, _days_since(first, now))


def optimize_fleet(
    db: Database,
    current: dict[str, dict[str, str | None]],
    *,
    goal: str = "balance",
    min_quality: float = 0.7,
    now: datetime | None = None,
) -> dict[str, Optimization]:
    """`optimize` (without a budget) of each agent of `current` (agent id → its `current`
    models), from one read of every agent's sums: what `optimize` of each gives."""
    _check(goal, min_quality)
    if not current:
        return {}
    since = (now or datetime.now(UTC)) - PERIODS["last_month"]
    only = next(iter(current)) if len(current) == 1 else None
    with db.read() as conn:
        sums = metrics_repo.fleet_task_model_sums(conn, since=since, agent_id=only)
    return {
        agent_id: _choose(sums.get(agent_id, []), models, goal, None, min_quality, 1.0)
        for agent_id, models in current.items()
    }


def _check(goal: str, min_quality: float) -> None:
    if goal not in GOALS:
        raise ValidationError(f"unknown goal {goal!r}: use {', '.join(GOALS)}")
    if not 0.0 <= min_quality <= 1.0:
        raise ValidationError("min_quality_threshold must be between 0 and 1")


def _choose(
    sums: Sequence[metrics_repo.TaskModelSums],
    current: dict[str, str | None],
    goal: str,
    budget_limit_usd: float | None,
    min_quality: float,
    days: float,
) -> Optimization:
    """`optimize`'s choice from an agent's sums, `days` the days its calls span."""
    tasks: dict[str, list[metrics_repo.TaskModelSums]] = defaultdict(list)
    for row in sums:
        tasks[row.task].append(row)
    by_task: dict[str, TaskOptimization] = {}
    cost_now = cost_new = 0.0
    quality_deltas: list[float] = []
    for task, group in sorted(tasks.items()):
        purposes: dict[str, int] = defaultdict(int)
        refs: dict[str, list[metrics_repo.TaskModelSums]] = defaultdict(list)
        for row in group:
            purposes[row.purpose] += row.calls
            refs[f"{row.provider}/{row.model}"].append(row)
        purpose = max(sorted(purposes), key=lambda p: purposes[p])
        models = {ref: _stats_of_sums(rows) for ref, rows in refs.items()}
        count = sum(row.calls for row in group)
        calls_per_day = count / days
        eligible = {
            ref: s
            for ref, s in models.items()
            if (s.avg_quality is None or s.avg_quality >= min_quality)
            and (budget_limit_usd is None or s.avg_cost * calls_per_day <= budget_limit_usd)
            and s.success_rate > 0
        }
        if not eligible:
            continue
        best_ref = max(eligible, key=lambda ref: _score(eligible[ref], eligible, goal))
        used_ref = current.get(purpose) or max(models, key=lambda r: models[r].usage_count)
        used = models.get(used_ref) or _stats_of_sums(group)
        best = eligible[best_ref]
        cost_now += used.avg_cost * count
        cost_new += best.avg_cost * count
        if used.avg_quality is not None and best.avg_quality is not None:
            quality_deltas.append(best.avg_quality - used.avg_quality)
        if best_ref == used_ref:
            continue
        by_task[task] = TaskOptimization(
            task_type=task,
            purpose=purpose,
            current_model=current.get(purpose),
            suggested_model=best_ref,
            reason=_reason(goal, used_ref, used, best_ref, best),
            expected_improvement=_improvement(used, best),
            current=used,
            suggested=best,
        )
    reduction = None if cost_now <= 0 else round(1 - cost_new / cost_now, 4)
    quality = round(sum(quality_deltas) / len(quality_deltas), 4) if quality_deltas else None
    return Optimization(goal, by_task, reduction, quality, sum(row.calls for row in sums))


def _stats_of_sums(rows: Sequence[metrics_repo.TaskModelSums]) -> Stats:
    """`stats_of` the calls these sums cover, from the sums."""
    calls = sum(r.calls for r in rows)
    if not calls:
        return Stats()
    ok = sum(r.ok_calls for r in rows)
    rated = sum(r.rated for r in rows)
    cost = sum(r.cost_usd for r in rows)
    return Stats(
        usage_count=calls,
        total_cost=cost,
        avg_latency=round(sum(r.ok_latency_ms for r in rows) / ok) if ok else 0,
        avg_quality=sum(r.quality_sum for r in rows) / rated if rated else None,
        success_rate=sum(r.succeeded for r in rows) / calls,
        evaluated=rated,
        avg_cost=cost / calls,
        total_tokens=sum(r.total_tokens for r in rows),
    )


def _days_since(first: datetime | None, now: datetime) -> float:
    """The days from the first call to now (at least 1)."""
    if first is None:
        return 1.0
    if first.tzinfo is None:
        first = first.replace(tzinfo=UTC)
    return max(1.0, (now - first).total_seconds() / 86_400)


def _score(s: Stats, pool: dict[str, Stats], goal: str) -> float:
    quality = s.avg_quality if s.avg_quality is not None else 0.5  # unrated: middling
    max_cost = max(p.avg_cost for p in pool.values()) or 1.0
    max_latency = max(p.avg_latency for p in pool.values()) or 1
    if goal == "minimize_cost":
        return -s.avg_cost + quality * 1e-9  # ties go to quality
    if goal == "maximize_quality":
        return quality * s.success_rate - s.avg_cost / max_cost * 1e-6
    if goal == "minimize_latency":
        return -s.avg_latency + quality * 1e-3
    return (
        quality * s.success_rate - 0.5 * s.avg_cost / max_cost - 0.1 * s.avg_latency / max_latency
    )


def _reason(goal: str, used_ref: str, used: Stats, best_ref: str, best: Stats) -> str:
    def q(s: Stats) -> str:
        return "unrated" if s.avg_quality is None else f"quality {s.avg_quality:.2f}"

    return (
        f"{goal}: {best_ref} ({q(best)}, ${best.avg_cost:.6f}/call, {best.avg_latency} ms, "
        f"{best.usage_count} calls) vs {used_ref} ({q(used)}, ${used.avg_cost:.6f}/call, "
        f"{used.avg_latency} ms, {used.usage_count} calls)"
    )


def _improvement(used: Stats, best: Stats) -> str:
    parts = []
    if used.avg_cost > 0:
        change = best.avg_cost / used.avg_cost - 1  # negative: cheaper
        parts.append(f"cost {change:+.0%}")
    if used.avg_quality is not None and best.avg_quality is not None:
        parts.append(f"quality {best.avg_quality - used.avg_quality:+.2f}")
    if used.avg_latency:
        parts.append(f"latency {used.avg_latency} → {best.avg_latency} ms")
    return ", ".join(parts) or "no measurable difference yet"
