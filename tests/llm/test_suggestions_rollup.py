"""The model suggestions read the daily rollup (its `failed_tasks`, revision 0046) and give
what the calls themselves give, on SQLite and on PostgreSQL.

Realistic mixed data: several agents, models, purposes (imports among them), task types
(none, empty), failures, ratings with failed and successful tasks (some given when
stored, some re-rated later), over more than the month `optimize` weighs, with calls at
every hour so the month starts in the middle of a UTC day. Each agent's sums per task
type, purpose and model from the rollup equal those over its calls; every goal's
choices, reasons and evidence are the same, with and without a budget, one agent at a
time (`optimize`) or the fleet at once (`optimize_fleet`, the Costs page's).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.llm import analysis
from opencrab.llm.analysis import GOALS, Optimization, optimize, optimize_fleet
from opencrab.llm.metrics import CallRecord
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.tables import llm_usage_daily, llm_usage_fleet_daily
from tests.fakes.postgres import PostgresServer

NOW = datetime(2026, 3, 20, 15, 47, 12, tzinfo=UTC)
AGENTS = ("エージェント-a", "agent-b", "agent-c")
MODELS = {  # provider/model: cost per call, median latency, quality, share of failed tasks
    "openai/gpt-5-mini": (0.0008, 900, 0.74, 0.25),
    "openai/gpt-5.2": (0.012, 4000, 0.93, 0.05),
    "anthropic/claude-sonnet-4.5": (0.006, 2500, 0.88, 0.12),
    "ollama/qwen3:8b": (0.0, 300, 0.62, 0.45),
}
PURPOSES = ("conversation", "thinking", "analysis", "import")
TASKS = ("chat", "discussion", "", None)


def calls(seed: int = 46) -> list[CallRecord]:
    """About 1,900 calls over 36 days before NOW."""
    rng = random.Random(seed)
    out = []
    for hour in range(36 * 24):
        for agent in AGENTS:
            if rng.random() < 0.4:
                continue
            ref = rng.choice(list(MODELS)[: 2 + AGENTS.index(agent)])
            cost, latency, quality, failing = MODELS[ref]
            ok = rng.random() > 0.08
            rated = ok and rng.random() < 0.5
            provider, model = ref.split("/")
            out.append(
                CallRecord(
                    id=str(uuid.UUID(int=rng.getrandbits(128))),
                    agent_id=agent,
                    timestamp=NOW - timedelta(hours=hour, minutes=rng.randrange(60)),
                    provider=provider,
                    model=model,
                    purpose=rng.choice(PURPOSES),
                    task_type=rng.choice(TASKS),
                    input_tokens=rng.randrange(100, 4000),
                    output_tokens=rng.randrange(10, 800),
                    total_tokens=rng.randrange(110, 4800),
                    estimated_cost_usd=round(cost * rng.uniform(0.5, 1.5), 7) if ok else 0.0,
                    latency_ms=int(latency * rng.lognormvariate(0, 0.4)),
                    status="ok" if ok else "error",
                    quality_score=round(min(1.0, quality * rng.uniform(0.85, 1.15)), 3)
                    if rated
                    else None,
                    task_success=(rng.random() > failing) if rated else None,
                )
            )
    return out


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Database]:
    """The calls stored through the repository, then some of them rated again, on each
    database (once per module: the tests only read)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('suggestions') / 'opencrab.db'}"
    else:
        postgres: PostgresServer = request.getfixturevalue("postgres")
        url = postgres.create_database()
    database = Database(url)
    database.upgrade()
    stored = calls()
    rows = [c.as_row() for c in stored]
    with database.write() as conn:
        metrics_repo.insert(conn, rows[: len(rows) // 2])
        metrics_repo.insert(conn, rows[len(rows) // 2 :])
    rng = random.Random(7)
    with database.write() as conn:  # failed tasks found later, and successes after all
        for c in rng.sample(stored, 150):
            assert metrics_repo.evaluate(
                conn,
                c.id,
                c.agent_id,
                quality_score=rng.random(),
                task_success=rng.random() < 0.6,
                self_evaluation="再評価",
                would_use_again=None,
                better_model_suggestion=None,
            )
    yield database
    database.close()
    if request.param != "sqlite":
        postgres.drop_database(url)


def from_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `optimize` sum the calls themselves (what it did before the rollup)."""
    monkeypatch.setattr(metrics_repo, "task_model_sums", metrics_repo.calls_task_model_sums)


def figures(result: Optimization) -> dict[str, Any]:
    """Everything an Optimization says, evidence included, by name (`by_task.<task>.
    current.avg_cost`, …)."""
    flat: dict[str, Any] = {
        "goal": result.goal,
        "reduction": result.expected_cost_reduction,
        "quality": result.expected_quality_change,
        "calls": result.calls_considered,
        "tasks": list(result.by_task),
    }
    for task, change in result.by_task.items():
        flat.update({f"{task}.{k}": v for k, v in change.as_json().items()})
        for side in ("current", "suggested"):
            stats = vars(getattr(change, side))
            flat.update({f"{task}.{side}.{k}": v for k, v in stats.items()})
    return flat


def same_figures(got: Optimization, want: Optimization) -> None:
    """The same choices, reasons and evidence: floats to summation order (the rollup adds
    a day's sums, the calls one by one), everything else exactly."""
    a, b = figures(got), figures(want)
    assert list(a) == list(b)
    for name, value in b.items():
        if isinstance(value, float):
            assert a[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
        else:
            assert a[name] == value, name


def same_sums(
    got: list[metrics_repo.TaskModelSums], want: list[metrics_repo.TaskModelSums]
) -> None:
    assert [r[:4] for r in got] == [r[:4] for r in want]  # the same groups, in order
    for a, b in zip(got, want, strict=True):
        assert a._replace(cost_usd=0.0, quality_sum=0.0) == b._replace(
            cost_usd=0.0, quality_sum=0.0
        )
        assert a.cost_usd == pytest.approx(b.cost_usd, rel=1e-9, abs=1e-12)
        assert a.quality_sum == pytest.approx(b.quality_sum, rel=1e-9, abs=1e-12)


def test_the_data_has_what_the_rollup_must_count(db: Database) -> None:
    with db.read() as conn:
        failed = conn.execute(sa.select(sa.func.sum(llm_usage_daily.c.failed_tasks))).scalar()
        fleet = conn.execute(sa.select(sa.func.sum(llm_usage_fleet_daily.c.failed_tasks))).scalar()
        sums = metrics_repo.calls_task_model_sums(conn, AGENTS[2], since=NOW - timedelta(30))
    assert int(failed) == int(fleet) > 100
    returned = sum(r.ok_calls for r in sums)
    assert 0 < sum(r.succeeded for r in sums) < returned  # failed tasks lower the success rate
    assert {r.task for r in sums} >= {"chat", "discussion", "thinking", "import"}


@pytest.mark.parametrize(
    "since",
    [NOW - timedelta(days=30), datetime(2026, 2, 18, tzinfo=UTC), NOW - timedelta(hours=5)],
    ids=["mid-day", "midnight", "today"],
)
def test_the_rollup_sums_equal_the_calls_sums(db: Database, since: datetime) -> None:
    with db.read() as conn:
        fleet = metrics_repo.fleet_task_model_sums(conn, since=since)
        assert sorted(fleet) == sorted(AGENTS)
        for agent in AGENTS:
            want = metrics_repo.calls_task_model_sums(conn, agent, since=since)
            assert want
            same_sums(metrics_repo.task_model_sums(conn, agent, since=since), want)
            same_sums(fleet[agent], want)


@pytest.mark.parametrize("goal", GOALS)
def test_the_same_suggestions_as_from_the_calls(
    db: Database, goal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    current: dict[str, dict[str, str | None]] = {
        AGENTS[0]: {"conversation": "openai/gpt-5.2"},
        AGENTS[1]: {},
        AGENTS[2]: {"conversation": "ollama/qwen3:8b", "analysis": "openai/gpt-5-mini"},
    }
    fleet = optimize_fleet(db, current, goal=goal, now=NOW)
    rolled = {
        agent: [
            optimize(db, agent, models, goal=goal, now=NOW, **budget)
            for budget in ({}, {"budget_limit_usd": 0.05}, {"budget_limit_usd": 0.4})
        ]
        for agent, models in current.items()
    }
    from_the_calls(monkeypatch)
    suggested = 0
    for agent, models in current.items():
        raw = [
            optimize(db, agent, models, goal=goal, now=NOW, **budget)
            for budget in ({}, {"budget_limit_usd": 0.05}, {"budget_limit_usd": 0.4})
        ]
        for got, want in zip(rolled[agent], raw, strict=True):
            same_figures(got, want)
        same_figures(fleet[agent], raw[0])
        suggested += len(raw[0].by_task)
    assert suggested >= 3  # the comparison covers real suggestions, not empty answers


def test_one_agents_fleet_read_is_that_agents(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    only = optimize_fleet(db, {AGENTS[1]: {}}, now=NOW)
    assert list(only) == [AGENTS[1]]
    from_the_calls(monkeypatch)
    same_figures(only[AGENTS[1]], analysis.optimize(db, AGENTS[1], {}, now=NOW))
