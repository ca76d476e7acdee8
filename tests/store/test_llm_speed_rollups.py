"""The fleet's rollup and the speed histograms (migration 0041) on both databases.

The percentiles read from the per-day histograms are compared with the exact
nearest-rank values of the same calls, over realistic mixed data (skewed latencies per
model, failures, imports, streamed and not, several days, filters whose periods start
mid-day); the tables written with every insert equal what the migration's back-fill
derives from the calls, also after concurrent writers; the fleet rollup equals the
per-agent rollup summed over the agents after re-pricing and rating.
"""

from __future__ import annotations

import math
import random
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.repositories import llm_analytics as repo
from opencrab.store.repositories import llm_monitoring
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories.llm_analytics import UsageFilter
from opencrab.store.repositories.metrics import MetricRow
from opencrab.store.repositories.metrics_speed import PERCENTILE_ERROR, rebuild_speed
from opencrab.store.tables import llm_usage_daily, llm_usage_fleet_daily, llm_usage_speed

MODELS = {
    # provider, model: median latency (ms), spread (lognormal sigma)
    ("openai", "gpt-5-mini"): (900, 0.6),
    ("openai", "gpt-5.2"): (4_000, 0.9),
    ("anthropic", "claude-sonnet-4.5"): (2_500, 0.5),
    ("ollama", "qwen3:8b"): (60, 1.2),  # many values under the exact buckets' edge
}
PURPOSES = ("conversation", "thinking", "analysis", "import")


def mixed_rows(count: int, *, days: int, seed: int) -> list[MetricRow]:
    """`count` calls over the last `days` days (today's up to now): lognormal latencies
    per model, 8 % failures, a quarter imported, half streamed with a first token."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    rows = []
    for n in range(count):
        (provider, model), (median, sigma) = rng.choice(list(MODELS.items()))
        latency = max(1, round(rng.lognormvariate(math.log(median), sigma)))
        streamed = rng.random() < 0.5
        ok = rng.random() > 0.08
        rows.append(
            MetricRow(
                str(uuid.UUID(int=rng.getrandbits(128))),
                f"agent-{n % 7}",
                None,
                now - timedelta(seconds=rng.random() * days * 86_400),
                provider,
                model,
                rng.choice(PURPOSES),
                rng.choice(("chat", "reflection", None)),
                None,
                500,
                100,
                600,
                0,
                0,
                0,
                round(rng.random() * 0.01, 6),
                "pricing",
                latency,
                max(1, round(latency * rng.uniform(0.05, 0.6))) if streamed else None,
                "ok" if ok else "error",
                None if ok else "ProviderServerError",
                None,
                streamed,
                None,
                1,
                None,
                None,
                None,
                None,
                None,
                None,
                now,
            )
        )
    return rows


@pytest.fixture
def mixed(any_db: Database) -> tuple[Database, list[MetricRow]]:
    rows = mixed_rows(4_000, days=9, seed=39)
    for start in range(0, len(rows), 1_000):  # batches, as the recorder writes them
        with any_db.write() as conn:
            metrics_repo.insert(conn, rows[start : start + 1_000])
    return any_db, rows


def within(found: int, exact: int) -> bool:
    return abs(found - exact) <= PERCENTILE_ERROR * exact


def test_histogram_percentiles_are_within_the_stated_bound(
    mixed: tuple[Database, list[MetricRow]],
) -> None:
    db, _ = mixed
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    filters = [
        UsageFilter(),
        UsageFilter(since=today - timedelta(days=5)),
        UsageFilter(source="live"),
        UsageFilter(source="imported", provider="openai"),
        UsageFilter(model="qwen3:8b"),
        # periods starting and ending mid-day: whole days from the histograms, the
        # parts of days at the ends from the calls
        UsageFilter(since=today - timedelta(days=6, hours=7), until=today - timedelta(hours=3)),
        UsageFilter(since=datetime.now(UTC) - timedelta(hours=30)),
    ]
    compared = 0
    for flt in filters:
        with db.read() as conn:
            approx = {p.model: p for p in repo.speed(conn, flt, exact=False)}
            exact = {p.model: p for p in repo.speed(conn, flt, exact=True)}
        assert exact, flt
        assert approx.keys() == exact.keys(), flt
        for model, want in exact.items():
            got = approx[model]
            assert got.calls == want.calls
            for kind in ("latency", "ttft"):
                found, truth = getattr(got, kind), getattr(want, kind)
                assert (found is None) == (truth is None), (flt, model, kind)
                if truth is None or found is None:
                    continue
                for f, t in zip(found, truth, strict=True):
                    assert within(f, t), (flt, model, kind, found, truth)
                    compared += 1
    assert compared > 100


def test_monitoring_percentiles_within_the_bound_and_the_slowest_exact(
    mixed: tuple[Database, list[MetricRow]],
) -> None:
    db, rows = mixed
    since = datetime.now(UTC) - timedelta(days=4, hours=5)
    with db.read() as conn:
        approx = llm_monitoring.latency_stats(conn, since=since, exact=False)
        exact = llm_monitoring.latency_stats(conn, since=since, exact=True)
    assert approx.keys() == exact.keys() == {p for p, _ in MODELS}
    for provider, want in exact.items():
        got = approx[provider]
        assert got.ok_calls == want.ok_calls
        assert (
            got.max_ms
            == want.max_ms
            == max(
                r.latency_ms
                for r in rows
                if r.provider == provider and r.status == "ok" and r.timestamp >= since
            )
        )
        assert want.p50_ms is not None
        assert want.p95_ms is not None
        assert got.p50_ms is not None
        assert got.p95_ms is not None
        assert within(got.p50_ms, want.p50_ms)
        assert within(got.p95_ms, want.p95_ms)


def test_the_routes_rank_few_calls_exactly(mixed: tuple[Database, list[MetricRow]]) -> None:
    db, _ = mixed
    one_model = UsageFilter(model="gpt-5.2", source="live")
    with db.read() as conn:
        assert repo.speed(conn, one_model) == repo.speed(conn, one_model, exact=True)
        agent = UsageFilter(agent_id="agent-3")
        assert repo.speed(conn, agent, exact=False) == repo.speed(conn, agent, exact=True)


def table_rows(db: Database, table: sa.Table) -> list[tuple[object, ...]]:
    with db.read() as conn:
        found = conn.execute(sa.select(table).order_by(*table.primary_key.columns)).all()
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in found]


def test_the_backfill_derives_what_the_inserts_wrote(
    mixed: tuple[Database, list[MetricRow]],
) -> None:
    db, _ = mixed
    written = table_rows(db, llm_usage_speed)
    assert written
    with db.write() as conn:
        counted = rebuild_speed(conn)
    assert counted == sum(1 for r in mixed[1] if r.status == "ok")
    assert table_rows(db, llm_usage_speed) == written


def fleet_of_daily(db: Database) -> list[tuple[object, ...]]:
    d = llm_usage_daily.c
    keys = [d.day, d.provider, d.model, d.purpose, d.task_type, d.status]
    sums = [
        c for c in llm_usage_daily.columns if c.name not in {"agent_id", *(k.name for k in keys)}
    ]
    query = sa.select(*keys, *(sa.func.sum(c) for c in sums)).group_by(*keys).order_by(*keys)
    with db.read() as conn:
        found = conn.execute(query).all()
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in found]


def test_the_fleet_rollup_is_the_daily_one_summed_over_agents(
    mixed: tuple[Database, list[MetricRow]],
) -> None:
    db, rows = mixed
    ok = [r for r in rows if r.status == "ok"]
    with db.write() as conn:
        metrics_repo.set_costs(conn, [(r.id, 0.5) for r in ok[:300]])
        for r in ok[300:320]:
            assert metrics_repo.evaluate(
                conn,
                r.id,
                r.agent_id,
                quality_score=0.75,
                task_success=True,
                self_evaluation="fine",
                would_use_again=True,
                better_model_suggestion=None,
            )
    assert table_rows(db, llm_usage_fleet_daily) == fleet_of_daily(db)
    with db.read() as conn:
        total = conn.execute(sa.select(sa.func.sum(llm_usage_fleet_daily.c.calls))).scalar()
    assert total == len(rows)


def test_concurrent_writers_lose_no_count(any_db: Database) -> None:
    batches = [mixed_rows(100, days=3, seed=100 + n) for n in range(6)]
    problems: list[BaseException] = []

    def write(part: list[list[MetricRow]]) -> None:
        try:
            for batch in part:
                with any_db.write() as conn:
                    metrics_repo.insert(conn, batch)
        except BaseException as exc:
            problems.append(exc)

    threads = [threading.Thread(target=write, args=(batches[n::3],)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    rows = [r for batch in batches for r in batch]
    s = llm_usage_speed.c
    with any_db.read() as conn:
        latency = conn.execute(sa.select(sa.func.sum(s.calls)).where(s.metric == "latency"))
        ttft = conn.execute(sa.select(sa.func.sum(s.calls)).where(s.metric == "ttft"))
        fleet = conn.execute(sa.select(sa.func.sum(llm_usage_fleet_daily.c.calls)))
        counts = (latency.scalar(), ttft.scalar(), fleet.scalar())
    ok = [r for r in rows if r.status == "ok"]
    assert counts == (
        len(ok),
        sum(1 for r in ok if r.time_to_first_token_ms is not None),
        len(rows),
    )
    written = table_rows(any_db, llm_usage_speed)
    with any_db.write() as conn:
        rebuild_speed(conn)
    assert table_rows(any_db, llm_usage_speed) == written
