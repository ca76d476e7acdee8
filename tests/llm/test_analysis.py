"""LLM meta-analysis over real llm_usage_metrics rows: the figures, recommendations and
their confidence, the optimisation for every goal, periods, and empty histories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from opencrab.errors import ValidationError
from opencrab.llm.analysis import (
    FULL_CONFIDENCE_SAMPLES,
    PERIODS,
    Call,
    analyze_usage,
    load_calls,
    optimize,
    recommend,
    since_for,
    stats_of,
)
from opencrab.llm.metrics import CallRecord, MetricsRecorder
from opencrab.store import Database
from opencrab.store.repositories import llm_analytics
from opencrab.store.repositories import metrics as metrics_repo

AGENT = "analysed-agent"
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
SMART = "openai/gpt-5.2"
MINI = "openai/gpt-5-mini"


def add(
    db: Database,
    ref: str,
    n: int,
    *,
    cost: float,
    latency: int,
    quality: float | None,
    purpose: str = "conversation",
    status: str = "ok",
    task_success: bool | None = None,
    task_type: str | None = None,
    complexity: str | None = None,
    agent: str = AGENT,
    age: timedelta = timedelta(hours=1),
    tokens: int = 150,
) -> None:
    provider, model = ref.split("/", 1)
    rows = [
        CallRecord(
            id=str(uuid4()),
            agent_id=agent,
            timestamp=NOW - age,
            provider=provider,
            model=model,
            purpose=purpose,
            task_type=task_type,
            complexity=complexity,
            input_tokens=tokens - 50,
            output_tokens=50,
            total_tokens=tokens,
            estimated_cost_usd=cost,
            latency_ms=latency,
            quality_score=quality,
            task_success=task_success,
            status="ok" if status == "ok" else "error",
        ).as_row()
        for _ in range(n)
    ]
    with db.write() as conn:  # through the repository: the calls and their rollups
        metrics_repo.insert(conn, rows)


def call(
    ref: str,
    *,
    cost: float = 0.01,
    latency: int = 100,
    quality: float | None = None,
    ok: bool = True,
    purpose: str = "conversation",
    task_success: bool | None = None,
) -> Call:
    provider, model = ref.split("/", 1)
    return Call(
        provider=provider,
        model=model,
        purpose=purpose,
        task_type=None,
        complexity=None,
        total_tokens=10,
        cost=cost,
        latency_ms=latency,
        ok=ok,
        quality=quality,
        task_success=task_success,
        timestamp=NOW,
    )


@pytest.fixture
def db(any_db: Database) -> Database:
    """Every analysis test here runs on SQLite and on PostgreSQL."""
    return any_db


@pytest.fixture
def history(db: Database) -> Database:
    """10 smart calls, 5 mini calls and one failed mini call this week; noise elsewhere."""
    add(db, SMART, 10, cost=0.02, latency=1000, quality=0.9, task_type="chat", complexity="high")
    add(db, MINI, 5, cost=0.002, latency=200, quality=0.88, task_type="chat")
    add(db, MINI, 1, cost=0.0, latency=9000, quality=None, purpose="analysis", status="error")
    add(db, SMART, 4, cost=9.0, latency=1, quality=0.1, agent="someone-else")
    add(db, SMART, 3, cost=5.0, latency=1, quality=0.1, age=timedelta(days=8))  # too old
    return db


# ------------------------------------------------------------------ figures
def test_totals(history: Database) -> None:
    analysis = analyze_usage(history, AGENT, period="last_week", now=NOW)
    assert analysis.period == "last_week"
    assert analysis.calls == 16
    assert analysis.total_cost == pytest.approx(10 * 0.02 + 5 * 0.002)
    assert analysis.total_tokens == 16 * 150
    assert analysis.avg_latency == round((10 * 1000 + 5 * 200) / 15)  # failed calls left out
    assert analysis.avg_quality == pytest.approx((10 * 0.9 + 5 * 0.88) / 15)
    avg_cost = 0.21 / 16
    assert analysis.cost_efficiency == pytest.approx(round(analysis.avg_quality / avg_cost, 4))
    assert analysis.quality_by_model == pytest.approx({SMART: 0.9, MINI: 0.88})


def test_per_model_and_per_purpose_stats(history: Database) -> None:
    analysis = analyze_usage(history, AGENT, period="last_week", now=NOW)
    smart, mini = analysis.by_model[SMART], analysis.by_model[MINI]
    assert set(analysis.by_model) == {SMART, MINI}
    assert (smart.usage_count, smart.avg_latency, smart.evaluated) == (10, 1000, 10)
    assert smart.total_cost == pytest.approx(0.2)
    assert smart.avg_cost == pytest.approx(0.02)
    assert smart.avg_quality == pytest.approx(0.9)
    assert smart.success_rate == 1.0
    assert (mini.usage_count, mini.avg_latency, mini.evaluated) == (6, 200, 5)
    assert mini.total_cost == pytest.approx(0.01)
    assert mini.avg_cost == pytest.approx(0.01 / 6)
    assert mini.success_rate == pytest.approx(5 / 6)
    assert mini.total_tokens == 6 * 150

    assert {k: s.usage_count for k, s in analysis.by_purpose.items()} == {
        "conversation": 15,
        "analysis": 1,
    }
    assert analysis.by_purpose["analysis"].success_rate == 0.0
    assert analysis.by_purpose["analysis"].avg_latency == 0  # no successful call to time
    assert analysis.by_purpose["analysis"].avg_quality is None


def test_grouping_by_other_keys(history: Database) -> None:
    by_task = analyze_usage(history, AGENT, group_by="task_type", now=NOW)
    assert {k: s.usage_count for k, s in by_task.by_group.items()} == {"chat": 15, "(none)": 1}
    by_complexity = analyze_usage(history, AGENT, group_by="complexity", now=NOW)
    assert {k: s.usage_count for k, s in by_complexity.by_group.items()} == {
        "high": 10,
        "(none)": 6,
    }
    assert by_complexity.group_by == "complexity"
    by_model = analyze_usage(history, AGENT, now=NOW)
    assert set(by_model.by_group) == {SMART, MINI}
    with pytest.raises(ValidationError, match="unknown grouping 'colour'"):
        analyze_usage(history, AGENT, group_by="colour", now=NOW)


def test_json_shape(history: Database) -> None:
    data = analyze_usage(history, AGENT, now=NOW).as_json()
    assert data["calls"] == 16
    assert data["total_cost"] == pytest.approx(0.21)
    assert data["avg_quality"] == round((10 * 0.9 + 5 * 0.88) / 15, 4)
    assert data["by_model"][MINI] == {
        "usage_count": 6,
        "total_cost": 0.01,
        "avg_latency": 200,
        "avg_quality": 0.88,
        "success_rate": round(5 / 6, 4),
        "evaluated": 5,
        "avg_cost": round(0.01 / 6, 8),
        "total_tokens": 900,
    }
    assert data["by_purpose"]["analysis"]["avg_quality"] is None
    assert "note" not in data


def test_task_failures_lower_the_success_rate(db: Database) -> None:
    add(db, SMART, 3, cost=0.01, latency=100, quality=0.5, task_success=False)
    add(db, SMART, 1, cost=0.01, latency=100, quality=0.9, task_success=True)
    stats = analyze_usage(db, AGENT, now=NOW).by_model[SMART]
    assert stats.success_rate == pytest.approx(0.25)
    assert stats.avg_latency == 100  # they still returned, so they are timed


def test_the_figures_defined_alike_agree_with_the_fleets_and_the_others_differ(
    db: Database,
) -> None:
    """Cost and quality mean the same here and on the Costs page (llm_analytics, read from
    the rollup for whole days); success (returned and not a failed task) is not the
    page's error count (status alone)."""
    day = datetime(2026, 1, 14, tzinfo=UTC)
    records = [
        CallRecord(
            id=str(uuid4()),
            agent_id=AGENT,
            provider="openai",
            model=model,
            purpose="conversation",
            task_type="chat",
            estimated_cost_usd=cost,
            latency_ms=100,
            status=status,
            quality_score=quality,
            task_success=success,
            timestamp=day + timedelta(hours=hour),
        )
        for hour, (model, cost, status, quality, success) in enumerate(
            [
                ("gpt-5.2", 0.02, "ok", 0.9, True),
                ("gpt-5.2", 0.03, "ok", 0.5, False),  # returned, rated a failed task
                ("gpt-5.2", 0.0, "error", None, None),
                ("gpt-5-mini", 0.002, "ok", 0.8, None),
                ("gpt-5-mini", 0.001, "ok", None, None),
            ]
        )
    ]
    MetricsRecorder(db).write(records)
    analysis = analyze_usage(db, AGENT, period="all")
    fleet = llm_analytics.UsageFilter(since=day, until=day + timedelta(days=1), agent_id=AGENT)
    assert fleet.whole_days  # the page's figures come from the rollup
    with db.read() as conn:
        models = {r.model: r for r in llm_analytics.rollup(conn, fleet)}
        cells = {c.model: c for c in llm_analytics.efficiency(conn, fleet)}
    for ref, stats in analysis.by_model.items():
        model = ref.split("/", 1)[1]
        assert stats.usage_count == models[model].calls == cells[model].calls
        assert stats.total_cost == pytest.approx(models[model].cost_usd)
        assert stats.avg_quality == pytest.approx(cells[model].avg_quality)
        assert stats.evaluated == cells[model].rated
    assert analysis.total_cost == pytest.approx(sum(r.cost_usd for r in models.values()))
    smart = analysis.by_model[SMART]
    assert models["gpt-5.2"].errors == 1  # the page: one of three calls failed to return
    assert smart.success_rate == pytest.approx(1 / 3)  # here: one of three succeeded


# ------------------------------------------------------------------ periods
def test_since_for_each_period() -> None:
    assert since_for("all", NOW) is None
    assert since_for("last_hour", NOW) == NOW - timedelta(hours=1)
    assert since_for("last_day", NOW) == NOW - timedelta(days=1)
    assert since_for("last_week", NOW) == NOW - timedelta(days=7)
    assert since_for("last_month", NOW) == NOW - timedelta(days=30)
    assert set(PERIODS) == {"last_hour", "last_day", "last_week", "last_month"}
    before = datetime.now(UTC)
    default = since_for("last_day")
    after = datetime.now(UTC)
    assert default is not None
    assert before - timedelta(days=1) <= default <= after - timedelta(days=1)
    with pytest.raises(ValidationError, match="unknown period 'last_century'"):
        since_for("last_century", NOW)


@pytest.mark.parametrize(
    ("period", "calls"),
    [("last_hour", 1), ("last_day", 2), ("last_week", 3), ("last_month", 4), ("all", 5)],
)
def test_periods_select_rows_by_age(db: Database, period: str, calls: int) -> None:
    for age in (
        timedelta(minutes=30),
        timedelta(hours=5),
        timedelta(days=3),
        timedelta(days=20),
        timedelta(days=400),
    ):
        add(db, SMART, 1, cost=0.01, latency=100, quality=None, age=age)
    assert analyze_usage(db, AGENT, period=period, now=NOW).calls == calls
    since = since_for(period, NOW)
    assert len(load_calls(db, AGENT, since=since)) == calls


def test_period_boundary_is_inclusive(db: Database) -> None:
    add(db, SMART, 1, cost=0.01, latency=100, quality=None, age=timedelta(hours=1))
    add(db, SMART, 1, cost=0.01, latency=100, quality=None, age=timedelta(hours=1, seconds=1))
    assert analyze_usage(db, AGENT, period="last_hour", now=NOW).calls == 1


# ------------------------------------------------------------------ empty history
def test_empty_history_gives_zero_figures(db: Database) -> None:
    analysis = analyze_usage(db, AGENT, period="last_week", now=NOW)
    assert (analysis.calls, analysis.total_cost, analysis.total_tokens) == (0, 0.0, 0)
    assert (analysis.avg_latency, analysis.avg_quality, analysis.cost_efficiency) == (0, None, None)
    assert (analysis.by_model, analysis.by_purpose, analysis.by_group) == ({}, {}, {})
    assert analysis.recommendations == []
    data = analysis.as_json()
    assert data["note"] == "no LLM calls recorded for this agent in the period"
    assert data["total_cost"] == 0
    result = optimize(db, AGENT, {"conversation": SMART}, now=NOW)
    assert result.by_task == {}
    assert result.calls_considered == 0
    assert result.expected_cost_reduction is None
    assert result.expected_quality_change is None
    assert recommend([]) == []
    assert stats_of([]).usage_count == 0


def test_free_calls_have_no_cost_efficiency(db: Database) -> None:
    add(db, "ollama/qwen3:8b", 3, cost=0.0, latency=50, quality=0.8)
    analysis = analyze_usage(db, AGENT, now=NOW)
    assert analysis.cost_efficiency is None  # no division by zero
    assert analysis.avg_quality == pytest.approx(0.8)


# ------------------------------------------------------------------ recommendations
def test_recommendations_from_the_history(history: Database) -> None:
    analysis = analyze_usage(history, AGENT, now=NOW)
    recs = analysis.recommendations
    assert [r.category for r in recs] == ["cost", "latency"]
    cost, latency = recs
    assert cost.suggestion == f"use {MINI} for conversation"
    assert cost.current == f"conversation: {SMART} at $0.020000/call, quality 0.90"
    assert cost.expected_improvement == "90% lower cost at quality 0.88"
    # evaluated samples: 10 and 5 → min(5 / 20, 1)
    assert cost.confidence == pytest.approx(5 / FULL_CONFIDENCE_SAMPLES)
    assert latency.suggestion == f"use {MINI} for conversation when speed matters"
    assert latency.expected_improvement == "1000 ms → 200 ms"
    assert latency.confidence == pytest.approx(5 / 20)  # calls: 10 and 5
    data = analysis.as_json("cost")
    assert [r["category"] for r in data["recommendations"]] == ["cost"]
    assert data["recommendations"][0]["confidence"] == 0.25
    assert len(analysis.as_json("efficiency")["recommendations"]) == 2
    assert analysis.as_json("reliability")["recommendations"] == []


def test_confidence_is_capped_at_one() -> None:
    calls = [call(SMART, cost=0.02, latency=1000, quality=0.9) for _ in range(40)]
    calls += [call(MINI, cost=0.002, latency=200, quality=0.9) for _ in range(25)]
    recs = recommend(calls)
    assert {r.category for r in recs} == {"cost", "latency"}
    assert all(r.confidence == 1.0 for r in recs)
    fewer = recommend(calls[:40] + calls[40:43])  # 3 mini calls
    assert all(r.confidence == pytest.approx(3 / 20) for r in fewer)


def test_quality_recommendation_for_a_better_model() -> None:
    calls = [call(MINI, cost=0.002, latency=300, quality=0.6) for _ in range(8)]
    calls += [call(SMART, cost=0.02, latency=400, quality=0.85) for _ in range(4)]
    (rec,) = recommend(calls)
    assert rec.category == "quality"
    assert rec.suggestion == f"use {SMART} for conversation"
    assert rec.expected_improvement == "quality 0.60 → 0.85"
    assert rec.confidence == pytest.approx(4 / 20)
    # a better model that is still under the floor is not recommended for quality
    assert recommend(calls, min_quality=0.9) == []


def test_single_weak_model_and_unreliable_model() -> None:
    weak = [call(MINI, quality=0.4) for _ in range(10)]
    (rec,) = recommend(weak)
    assert rec.category == "quality"
    assert "below 0.70" in rec.current
    assert rec.confidence == pytest.approx(10 / 20 * 0.5)

    flaky = [call(SMART) for _ in range(6)] + [call(SMART, ok=False) for _ in range(4)]
    (rec,) = recommend(flaky)
    assert rec.category == "reliability"
    assert rec.current == f"conversation: {SMART} succeeds in 60% of calls"
    assert rec.confidence == pytest.approx(10 / 20)
    assert recommend(flaky[:2] + flaky[-2:]) == []  # fewer than 5 calls: no verdict


def test_recommendations_are_per_purpose_and_sorted_by_confidence() -> None:
    calls = [call(SMART, cost=0.02, quality=0.9, purpose="thinking") for _ in range(20)]
    calls += [call(MINI, cost=0.002, quality=0.9, purpose="thinking") for _ in range(20)]
    calls += [call(SMART, cost=0.02, quality=0.9, purpose="analysis") for _ in range(6)]
    calls += [call(MINI, cost=0.002, quality=0.9, purpose="analysis") for _ in range(2)]
    recs = recommend(calls)
    assert [(r.category, r.current.split(":")[0], r.confidence) for r in recs] == [
        ("cost", "thinking", 1.0),
        ("cost", "analysis", pytest.approx(0.1)),
    ]


# ------------------------------------------------------------------ optimisation
CHEAP = "google/gemini-2.5-flash-lite"
QUICK = "openai/gpt-5-nano"
BEST = "anthropic/claude-opus-4.6"
MID = "openai/gpt-5-mini"
CURRENT = "openai/gpt-5.2"


@pytest.fixture
def choices(db: Database) -> Database:
    """Five models for conversation; each goal has a different best one."""
    add(db, CHEAP, 5, cost=0.0005, latency=1500, quality=0.75)
    add(db, QUICK, 5, cost=0.004, latency=100, quality=0.80)
    add(db, BEST, 5, cost=0.030, latency=3000, quality=0.97)
    add(db, MID, 5, cost=0.002, latency=600, quality=0.90)
    add(db, CURRENT, 5, cost=0.010, latency=2000, quality=0.85)
    add(db, BEST, 5, cost=0.5, latency=1, quality=1.0, age=timedelta(days=31))  # too old
    return db


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("minimize_cost", CHEAP),
        ("minimize_latency", QUICK),
        ("maximize_quality", BEST),
        ("balance", MID),
    ],
)
def test_optimize_picks_the_model_for_each_goal(
    choices: Database, goal: str, expected: str
) -> None:
    result = optimize(choices, AGENT, {"conversation": CURRENT}, goal=goal, now=NOW)
    assert result.goal == goal
    assert result.calls_considered == 25
    change = result.by_task["conversation"]
    assert change.suggested_model == expected
    assert change.current_model == CURRENT
    assert change.current.usage_count == 5
    assert change.reason.startswith(f"{goal}: {expected} (")
    assert f"vs {CURRENT} (quality 0.85, $0.010000/call, 2000 ms, 5 calls)" in change.reason
    assert change.as_json()["task_type"] == "conversation"
    assert change.as_json()["suggested_model"] == expected


def test_optimize_expected_changes(choices: Database) -> None:
    cheap = optimize(choices, AGENT, {"conversation": CURRENT}, goal="minimize_cost", now=NOW)
    assert cheap.expected_cost_reduction == pytest.approx(1 - 0.0005 / 0.010)
    assert cheap.expected_quality_change == pytest.approx(0.75 - 0.85)
    improvement = cheap.by_task["conversation"].expected_improvement
    assert "cost -95%" in improvement  # 95% cheaper
    assert "quality -0.10" in improvement
    assert "latency 2000 → 1500 ms" in improvement

    best = optimize(choices, AGENT, {"conversation": CURRENT}, goal="maximize_quality", now=NOW)
    assert best.expected_cost_reduction == pytest.approx(1 - 0.030 / 0.010)  # costs 3x more
    assert best.expected_quality_change == pytest.approx(0.97 - 0.85)


def test_optimize_keeps_the_current_model_when_it_is_best(choices: Database) -> None:
    result = optimize(choices, AGENT, {"conversation": BEST}, goal="maximize_quality", now=NOW)
    assert result.by_task == {}
    assert result.expected_cost_reduction == 0.0
    assert result.expected_quality_change == 0.0


def test_optimize_without_a_current_model_compares_with_the_most_used(db: Database) -> None:
    add(db, CURRENT, 8, cost=0.010, latency=2000, quality=0.85)
    add(db, CHEAP, 3, cost=0.0005, latency=1500, quality=0.80)
    result = optimize(db, AGENT, {}, goal="minimize_cost", now=NOW)
    change = result.by_task["conversation"]
    assert change.current_model is None
    assert change.suggested_model == CHEAP
    assert change.current.usage_count == 8


def test_optimize_respects_the_quality_floor(choices: Database) -> None:
    result = optimize(
        choices, AGENT, {"conversation": CURRENT}, goal="minimize_cost", min_quality=0.8, now=NOW
    )
    assert result.by_task["conversation"].suggested_model == MID  # CHEAP is under 0.8
    nothing = optimize(
        choices, AGENT, {"conversation": CURRENT}, goal="minimize_cost", min_quality=0.99, now=NOW
    )
    assert nothing.by_task == {}


def test_optimize_respects_the_daily_budget(choices: Database) -> None:
    # 25 calls in the last day: BEST would cost 0.75 a day, over a 0.5 budget
    result = optimize(
        choices,
        AGENT,
        {"conversation": CURRENT},
        goal="maximize_quality",
        budget_limit_usd=0.5,
        now=NOW,
    )
    assert result.by_task["conversation"].suggested_model == MID


def test_optimize_never_suggests_a_model_that_always_fails(db: Database) -> None:
    add(db, CURRENT, 5, cost=0.010, latency=2000, quality=0.85)
    add(db, "ollama/broken", 5, cost=0.0, latency=10, quality=None, status="error")
    result = optimize(db, AGENT, {"conversation": CURRENT}, goal="minimize_cost", now=NOW)
    assert result.by_task == {}


def test_optimize_per_purpose(db: Database) -> None:
    add(db, CURRENT, 5, cost=0.010, latency=2000, quality=0.85, purpose="conversation")
    add(db, CHEAP, 5, cost=0.001, latency=2000, quality=0.85, purpose="conversation")
    add(db, CURRENT, 5, cost=0.010, latency=2000, quality=0.85, purpose="analysis")
    result = optimize(
        db,
        AGENT,
        {"conversation": CURRENT, "analysis": CURRENT},
        goal="minimize_cost",
        now=NOW,
    )
    assert set(result.by_task) == {"conversation"}  # analysis has nothing cheaper
    # every call of a purpose at the suggested model's rate: now 10 x 0.010 + 5 x 0.010,
    # after 10 x 0.001 + 5 x 0.010
    assert result.expected_cost_reduction == pytest.approx(1 - 0.06 / 0.15)


def test_optimize_validates_its_arguments(db: Database) -> None:
    with pytest.raises(ValidationError, match="unknown goal 'be_lucky'"):
        optimize(db, AGENT, {}, goal="be_lucky")
    for bad in (-0.1, 1.1):
        with pytest.raises(ValidationError, match="min_quality_threshold"):
            optimize(db, AGENT, {}, min_quality=bad)


def test_optimize_recommends_per_task_type(db: Database) -> None:
    # the analysis purpose serves two task types with different best models
    add(
        db,
        CURRENT,
        6,
        cost=0.010,
        latency=900,
        quality=0.9,
        purpose="analysis",
        task_type="compaction",
    )
    add(
        db,
        CHEAP,
        4,
        cost=0.001,
        latency=900,
        quality=0.9,
        purpose="analysis",
        task_type="compaction",
    )
    add(
        db,
        CURRENT,
        3,
        cost=0.010,
        latency=900,
        quality=0.9,
        purpose="analysis",
        task_type="reflection",
    )
    add(
        db, MID, 3, cost=0.002, latency=900, quality=0.9, purpose="analysis", task_type="reflection"
    )
    add(
        db,
        CURRENT,
        5,
        cost=0.010,
        latency=900,
        quality=0.9,
        purpose="tool_calling",
        task_type="chat",
    )
    result = optimize(
        db, AGENT, {"analysis": CURRENT, "tool_calling": CURRENT}, goal="minimize_cost", now=NOW
    )
    assert set(result.by_task) == {"compaction", "reflection"}  # chat has nothing cheaper
    compaction = result.by_task["compaction"].as_json()
    assert compaction["task_type"] == "compaction"
    assert compaction["purpose"] == "analysis"
    assert compaction["current_model"] == CURRENT
    assert compaction["suggested_model"] == CHEAP
    assert result.by_task["reflection"].suggested_model == MID
    # the per-purpose configuration follows the purpose's busiest task type
    assert {p: c.suggested_model for p, c in result.by_purpose().items()} == {"analysis": CHEAP}
