"""The meta-analysis on real metrics rows: figures, recommendations with confidence, and
the optimisation for every goal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from opencrab.errors import ValidationError
from opencrab.llm.analysis import analyze_usage, optimize, since_for
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics

AGENT = "agent-1"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SMART = ("openai", "gpt-5.2")
FAST = ("openai", "gpt-5-mini")


def add(
    db: Database,
    model: tuple[str, str],
    n: int,
    *,
    cost: float,
    latency: int,
    quality: float | None,
    purpose: str = "conversation",
    status: str = "ok",
    agent: str = AGENT,
    age: timedelta = timedelta(hours=1),
) -> None:
    rows = [
        {
            "id": str(uuid4()),
            "agent_id": agent,
            "timestamp": NOW - age,
            "provider": model[0],
            "model": model[1],
            "purpose": purpose,
            "input_tokens": 100,
            "output_tokens": 50,
            "total_tokens": 150,
            "estimated_cost_usd": cost,
            "latency_ms": latency,
            "quality_score": quality,
            "status": status,
            "created_at": NOW,
        }
        for _ in range(n)
    ]
    with db.write() as conn:
        conn.execute(llm_usage_metrics.insert(), rows)


def test_empty_history_gives_zero_figures(db: Database) -> None:
    analysis = analyze_usage(db, AGENT, period="last_week", now=NOW).as_json()
    assert (analysis["calls"], analysis["total_cost"], analysis["recommendations"]) == (0, 0, [])
    assert "no LLM calls" in analysis["note"]
    result = optimize(db, AGENT, {}, now=NOW)
    assert (result.calls_considered, result.by_purpose) == (0, {})


def test_figures_and_a_cost_recommendation(db: Database) -> None:
    add(db, SMART, 20, cost=0.010, latency=2000, quality=0.90)
    add(db, FAST, 10, cost=0.001, latency=500, quality=0.88)
    add(db, FAST, 5, cost=0.001, latency=500, quality=None, agent="someone-else")
    add(db, SMART, 3, cost=0.5, latency=10, quality=0.1, age=timedelta(days=40))  # too old

    analysis = analyze_usage(db, AGENT, period="last_week", now=NOW)
    data = analysis.as_json()

    assert data["calls"] == 30
    assert data["total_cost"] == pytest.approx(20 * 0.010 + 10 * 0.001)
    assert data["total_tokens"] == 30 * 150
    smart = data["by_model"]["openai/gpt-5.2"]
    assert (smart["usage_count"], smart["avg_latency"], smart["avg_quality"]) == (20, 2000, 0.9)
    assert data["avg_quality"] == pytest.approx((20 * 0.90 + 10 * 0.88) / 30, abs=1e-4)
    assert data["cost_efficiency"] == pytest.approx(data["avg_quality"] / (0.21 / 30), rel=1e-3)
    categories = {r["category"]: r for r in data["recommendations"]}
    assert "use openai/gpt-5-mini for conversation" in categories["cost"]["suggestion"]
    assert "90%" in categories["cost"]["expected_improvement"]
    assert categories["cost"]["confidence"] == pytest.approx(10 / 20)  # fewer samples of the two
    assert categories["latency"]["confidence"] == pytest.approx(10 / 20)
    cost_only = analysis.as_json("cost")["recommendations"]
    assert {r["category"] for r in cost_only} == {"cost"}


def test_reliability_recommendation(db: Database) -> None:
    add(db, SMART, 6, cost=0.01, latency=100, quality=None)
    add(db, SMART, 4, cost=0.0, latency=100, quality=None, status="error")
    data = analyze_usage(db, AGENT, period="last_day", now=NOW).as_json()
    reliability = [r for r in data["recommendations"] if r["category"] == "reliability"]
    assert len(reliability) == 1
    assert "60%" in reliability[0]["current"]


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("minimize_cost", "openai/gpt-5-mini"),
        ("minimize_latency", "openai/gpt-5-mini"),
        ("maximize_quality", "anthropic/claude-opus-4.6"),
        ("balance", "openai/gpt-5-mini"),
    ],
)
def test_optimize_each_goal(db: Database, goal: str, expected: str) -> None:
    add(db, SMART, 10, cost=0.010, latency=2000, quality=0.85)
    add(db, FAST, 10, cost=0.001, latency=400, quality=0.84)
    add(db, ("anthropic", "claude-opus-4.6"), 10, cost=0.030, latency=3000, quality=0.97)

    result = optimize(db, AGENT, {"conversation": "openai/gpt-5.2"}, goal=goal, now=NOW)

    assert result.calls_considered == 30
    assert result.by_purpose["conversation"].suggested_model == expected
    if goal == "minimize_cost":
        assert result.expected_cost_reduction == pytest.approx(0.9)
        assert result.expected_quality_change == pytest.approx(-0.01)


def test_optimize_respects_quality_floor_and_budget(db: Database) -> None:
    add(db, SMART, 10, cost=0.010, latency=2000, quality=0.85)
    add(db, FAST, 10, cost=0.001, latency=400, quality=0.50)
    cheap_but_bad = optimize(
        db,
        AGENT,
        {"conversation": "openai/gpt-5.2"},
        goal="minimize_cost",
        min_quality=0.8,
        now=NOW,
    )
    assert cheap_but_bad.by_purpose == {}  # the current model is already the best allowed
    over_budget = optimize(
        db,
        AGENT,
        {"conversation": "openai/gpt-5.2"},
        goal="maximize_quality",
        budget_limit_usd=0.05,
        min_quality=0.0,
        now=NOW,
    )
    # 20 calls over one day: gpt-5.2 would cost 0.10/day, over the budget
    assert over_budget.by_purpose["conversation"].suggested_model == "openai/gpt-5-mini"
    with pytest.raises(ValidationError):
        optimize(db, AGENT, {}, goal="be_lucky")


def test_periods() -> None:
    assert since_for("all") is None
    assert since_for("last_hour", NOW) == NOW - timedelta(hours=1)
    assert since_for("last_month", NOW) == NOW - timedelta(days=30)
    with pytest.raises(ValidationError):
        since_for("last_century", NOW)
