"""The LLM cost dashboard's repository (store/repositories/llm_analytics.py) on both
databases: every figure equals the same sum written directly in SQL over
llm_usage_metrics, or computed in Python from the seeded rows."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.repositories import llm_analytics as repo
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories.llm_analytics import UsageFilter
from opencrab.store.repositories.metrics import MetricRow
from opencrab.store.tables import llm_usage_metrics
from tests.fakes.metrics_rows import usage_rows

AGENTS = ("a1", "a2", "a3")
TS = llm_usage_metrics.c.timestamp.type


class Total(NamedTuple):
    calls: int
    errors: int
    cache_read_tokens: int
    cost_usd: float


def total(rows: list[repo.ModelRollup]) -> Total:
    return Total(
        sum(r.calls for r in rows),
        sum(r.errors for r in rows),
        sum(r.cache_read_tokens for r in rows),
        sum(r.cost_usd for r in rows),
    )


@pytest.fixture
def seeded(any_db: Database) -> tuple[Database, list[MetricRow]]:
    rows = usage_rows(AGENTS, days=15, per_day=5)
    with any_db.write() as conn:
        metrics_repo.insert(conn, rows)
    return any_db, rows


def sql_sums(db: Database, where: str, **params: object) -> tuple[int, int, int, float]:
    """calls, errors, cached tokens and cost, written out by hand in SQL."""
    query = sa.text(
        "SELECT COUNT(*), SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END), "
        "SUM(cache_read_tokens), SUM(estimated_cost_usd) FROM llm_usage_metrics WHERE " + where
    ).bindparams(*(sa.bindparam(k, type_=TS) for k in params if k in ("since", "until")))
    with db.read() as conn:
        n, e, c, cost = conn.execute(query, params).one()
    return int(n), int(e or 0), int(c or 0), float(cost or 0.0)


FILTERS = [
    (UsageFilter(), "1 = 1", {}),
    (UsageFilter(agent_id="a2"), "agent_id = :agent", {"agent": "a2"}),
    (UsageFilter(source="imported"), "purpose = 'import'", {}),
    (UsageFilter(source="live", purpose="thinking"), "purpose = 'thinking'", {}),
    (UsageFilter(source="live"), "purpose <> 'import'", {}),
    (
        UsageFilter(provider="openai", model="gpt-5.2"),
        "provider = 'openai' AND model = 'gpt-5.2'",
        {},
    ),
]


@pytest.mark.parametrize(("flt", "where", "params"), FILTERS)
def test_totals_equal_the_sql_sums(
    seeded: tuple[Database, list[MetricRow]], flt: UsageFilter, where: str, params: dict[str, str]
) -> None:
    db, _ = seeded
    with db.read() as conn:
        totals = total(repo.rollup(conn, flt))
        series = repo.cost_series(conn, flt, bucket="week", stack="agent")
        shares = repo.shares(conn, flt, by="provider")
    calls, errors, cached, cost = sql_sums(db, where, **params)
    assert calls > 0
    assert (totals.calls, totals.errors, totals.cache_read_tokens) == (calls, errors, cached)
    assert totals.cost_usd == pytest.approx(cost, rel=1e-12)
    assert sum(p.calls for p in series) == calls
    assert sum(p.cost_usd for p in series) == pytest.approx(cost, rel=1e-9)
    assert sum(s.calls for s in shares) == calls


def test_a_period_counts_whole_utc_days(seeded: tuple[Database, list[MetricRow]]) -> None:
    db, rows = seeded
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since, until = today - timedelta(days=6), today - timedelta(days=2)
    flt = UsageFilter(since=since, until=until, agent_id="a1")
    with db.read() as conn:
        totals = total(repo.rollup(conn, flt))
        by_day = repo.cost_series(conn, flt, bucket="day", stack="model")
    expected = [r for r in rows if r.agent_id == "a1" and since <= r.timestamp < until]
    where = "agent_id = 'a1' AND timestamp >= :since AND timestamp < :until"
    assert sql_sums(db, where, since=since, until=until)[0] == len(expected) == totals.calls
    assert totals.cost_usd == pytest.approx(sum(r.estimated_cost_usd for r in expected))
    assert sorted({p.bucket for p in by_day}) == [
        (since + timedelta(days=d)).date().isoformat() for d in range(4)
    ]


def test_weeks_start_on_monday(seeded: tuple[Database, list[MetricRow]]) -> None:
    db, rows = seeded
    with db.read() as conn:
        weeks = repo.cost_series(conn, UsageFilter(), bucket="week", stack="purpose")
    expected: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        monday = (r.timestamp - timedelta(days=r.timestamp.weekday())).date().isoformat()
        expected[(monday, r.purpose)] += 1
    assert {(p.bucket, p.key): p.calls for p in weeks} == dict(expected)


def test_percentiles_are_nearest_rank_per_model(seeded: tuple[Database, list[MetricRow]]) -> None:
    db, rows = seeded
    with db.read() as conn:
        speed = {p.model: p for p in repo.speed(conn, UsageFilter(source="live"))}
    for model, found in speed.items():
        ok = [r for r in rows if r.model == model and r.status == "ok" and r.purpose != "import"]
        latency = sorted(r.latency_ms for r in ok)
        ttft = sorted(r.time_to_first_token_ms for r in ok if r.time_to_first_token_ms is not None)
        assert found.calls == len(ok)
        rank = [latency[max(0, math.ceil(p * len(latency)) - 1)] for p in repo.PERCENTILES]
        assert found.latency == tuple(rank)
        if ttft:
            assert found.ttft == tuple(
                ttft[max(0, math.ceil(p * len(ttft)) - 1)] for p in (0.5, 0.9, 0.99)
            )


def test_quality_efficiency_errors_and_cache(seeded: tuple[Database, list[MetricRow]]) -> None:
    db, rows = seeded
    flt = UsageFilter(agent_id="a3")
    mine = [r for r in rows if r.agent_id == "a3"]
    with db.read() as conn:
        quality = repo.quality_series(conn, flt, bucket="day")
        cells = repo.efficiency(conn, flt)
        rolled = repo.rollup(conn, flt)
    rated = [r for r in mine if r.quality_score is not None]
    assert sum(q.rated for q in quality) == len(rated)
    assert sum(q.avg_quality * q.rated for q in quality) == pytest.approx(
        sum(r.quality_score or 0 for r in rated)
    )
    cell = {(c.model, c.task_type): c for c in cells}
    for (model, task), c in cell.items():
        these = [r for r in mine if r.model == model and (r.task_type or r.purpose) == task]
        assert c.calls == len(these)
        assert c.cost_usd == pytest.approx(sum(r.estimated_cost_usd for r in these))
    assert sum(c.calls for c in cells) == len(mine)
    assert {(g.provider, g.model): (g.errors, g.cache_read_tokens) for g in rolled} == {
        (p, m): (
            sum(1 for r in mine if (r.provider, r.model) == (p, m) and r.status != "ok"),
            sum(r.cache_read_tokens for r in mine if (r.provider, r.model) == (p, m)),
        )
        for p, m in {(r.provider, r.model) for r in mine}
    }


def test_choices_list_what_is_stored(seeded: tuple[Database, list[MetricRow]]) -> None:
    db, rows = seeded
    with db.read() as conn:
        found = repo.choices(conn)
    assert found["agents"] == sorted(AGENTS)
    assert found["purposes"] == sorted({r.purpose for r in rows})
