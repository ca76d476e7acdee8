"""Every `/api/llm/*` and `/api/analytics/*` route and the Costs, Analytics and Budgets
pages at a million LLM calls, on SQLite and on PostgreSQL, before and after.

One run per database: a store seeded with 1,000,000 `llm_usage_metrics` rows across 50
agents and 90 days (executemany in batches, through the metrics repository, which keeps
the daily rollup `llm_usage_daily` and the speed histograms `llm_usage_speed` in step);
then, in-process HTTP (routing, the filter, the repositories, JSON or HTML), the median
time of each route and page fleet-wide over the last 30 days, twice in the same process:
"exact" ranks the calls for every percentile (the repositories' `exact=True` path, what
the routes did before the histograms) and sums each agent's calls for the model
suggestions (what they did before the rollup counted failed tasks), and "now" is what
the routes do (percentiles over many calls from the histograms, within 2 %; the
suggestions from the rollup, one read for the fleet). Target: now <= 300 ms for every line.
On SQLite, as before, each Costs chart's route against the same query by hand in bare
SQL (ratio bare / route, target at least 0.5), and the Costs page's time to first chart.

    python bench/analytics.py [--rows 1000000] [--agents 50] [--days 90] [--rounds 5]
                              [--db sqlite postgresql]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WHERE = "timestamp >= :since"
BARE = {
    "totals": "SELECT COUNT(*), SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END), "
    "SUM(input_tokens), SUM(output_tokens), SUM(total_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens), SUM(estimated_cost_usd) FROM llm_usage_metrics WHERE {w}",
    "cost": "SELECT substr(timestamp, 1, 10) AS b, model, SUM(estimated_cost_usd), COUNT(*) "
    "FROM llm_usage_metrics WHERE {w} GROUP BY b, model ORDER BY b, model",
    "share": "SELECT model, COUNT(*), SUM(estimated_cost_usd) AS c, SUM(total_tokens) "
    "FROM llm_usage_metrics WHERE {w} GROUP BY model ORDER BY c DESC, model",
    "quality": "SELECT substr(timestamp, 1, 10) AS b, AVG(quality_score), COUNT(quality_score) "
    "FROM llm_usage_metrics WHERE {w} AND quality_score IS NOT NULL GROUP BY b ORDER BY b",
    "efficiency": "SELECT model, COALESCE(task_type, purpose) AS t, COUNT(*), "
    "SUM(estimated_cost_usd), AVG(quality_score), COUNT(quality_score) FROM llm_usage_metrics "
    "WHERE {w} GROUP BY model, t ORDER BY model, t",
    "speed": "SELECT model, latency_ms FROM llm_usage_metrics WHERE {w} AND status = 'ok' "
    "ORDER BY model, latency_ms; SELECT model, time_to_first_token_ms FROM llm_usage_metrics "
    "WHERE {w} AND status = 'ok' AND time_to_first_token_ms IS NOT NULL "
    "ORDER BY model, time_to_first_token_ms; SELECT model, COUNT(*) FROM llm_usage_metrics "
    "WHERE {w} AND status = 'ok' GROUP BY model",
    "errors": "SELECT provider, COUNT(*), SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) "
    "FROM llm_usage_metrics WHERE {w} GROUP BY provider ORDER BY provider",
    "cache": "SELECT provider, model, SUM(input_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens) FROM llm_usage_metrics WHERE {w} GROUP BY provider, model "
    "ORDER BY provider, model",
}
"""Each chart's aggregate over the calls by hand (SQLite). The speed chart's percentiles
have no SQLite aggregate: its bare queries are the ordered fetches of the two columns it
ranks and the count (the three statements the route runs on SQLite)."""

DAILY_WHERE = "day >= :day"
BY_MODEL = (
    "SELECT provider, model, SUM(calls), SUM(CASE WHEN status = 'ok' THEN 0 ELSE calls END), "
    "SUM(input_tokens), SUM(output_tokens), SUM(total_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens), SUM(cost_usd) FROM llm_usage_daily WHERE {w} "
    "GROUP BY provider, model ORDER BY provider, model"
)
ROLLED = {
    "totals": BY_MODEL,
    "cost": "SELECT day, model, SUM(cost_usd), SUM(calls) FROM llm_usage_daily WHERE {w} "
    "GROUP BY day, model ORDER BY day, model",
    "share": BY_MODEL,
    "quality": "SELECT day, CASE WHEN SUM(quality_count) > 0 THEN SUM(quality_sum) / "
    "SUM(quality_count) END, SUM(quality_count) FROM llm_usage_daily WHERE {w} "
    "AND quality_count > 0 GROUP BY day ORDER BY day",
    "efficiency": "SELECT model, COALESCE(NULLIF(task_type, ''), purpose) AS t, SUM(calls), "
    "SUM(cost_usd), CASE WHEN SUM(quality_count) > 0 THEN SUM(quality_sum) / "
    "SUM(quality_count) END, SUM(quality_count) FROM llm_usage_daily WHERE {w} "
    "GROUP BY model, t ORDER BY model, t",
    "errors": BY_MODEL,
    "cache": BY_MODEL,
}
"""The query each route runs over the daily rollup (store/repositories/llm_analytics.py:
totals, model shares, error rates and the cache report all come from one per-model
rollup query). A chart not named here reads the calls: its bare SQL is BARE's."""

MODELS = [
    ("openai", "gpt-5-mini"),
    ("openai", "gpt-5.2"),
    ("anthropic", "claude-sonnet-4.5"),
    ("anthropic", "claude-haiku-4.5"),
    ("google", "gemini-3-flash"),
    ("ollama", "qwen3:8b"),
]
PURPOSES = ["conversation", "thinking", "analysis", "tool_calling", "import"]
TASKS = ["chat", "discussion", "reflection", "compaction", None]


def seed(db: Any, agent_ids: list[str], rows: int, days: int) -> None:
    """`rows` calls spread over the agents and the last `days` days, batches of 20,000."""
    from opencrab.store.repositories import metrics as metrics_repo
    from opencrab.store.repositories.metrics import MetricRow

    rng = random.Random(90)
    now = datetime.now(UTC)
    span = days * 86_400
    batch: list[MetricRow] = []
    for n in range(rows):
        provider, model = MODELS[n % len(MODELS)]
        moment = now - timedelta(seconds=rng.random() * span)
        ok = rng.random() > 0.05
        inputs = rng.randrange(100, 6000)
        batch.append(
            MetricRow(
                str(uuid.UUID(int=rng.getrandbits(128))),
                agent_ids[n % len(agent_ids)],
                None,
                moment,
                provider,
                model,
                PURPOSES[rng.randrange(5)],
                TASKS[rng.randrange(5)],
                None,
                inputs,
                300,
                inputs + 300,
                inputs // 3 if n % 2 else 0,
                0,
                0,
                inputs * 2e-7,
                "pricing",
                rng.randrange(80, 9000),
                rng.randrange(20, 900) if n % 3 else None,
                "ok" if ok else "error",
                None,
                None,
                bool(n % 3),
                None,
                1,
                None,
                round(rng.random(), 3) if n % 4 == 0 else None,
                None,
                None,
                None,
                None,
                moment,
            )
        )
        if len(batch) == 20_000:
            with db.write() as conn:
                metrics_repo.insert(conn, batch)
            batch = []
    if batch:
        with db.write() as conn:
            metrics_repo.insert(conn, batch)


def median_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()  # warm: the page cache, prepared plans
    spent = []
    for _ in range(rounds):
        begin = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - begin)
    return statistics.median(spent) * 1000


ROUTES = [
    *(
        f"/api/analytics/llm/{name}?days=30"
        for name in (
            "totals",
            "cost",
            "share",
            "quality",
            "efficiency",
            "speed",
            "errors",
            "cache",
            "suggestions",
        )
    ),
    "/api/analytics/llm/export?days=30",
    "/api/analytics/llm/export?days=30&format=csv&table=speed",
    *(
        f"/api/analytics/{name}?period=month"
        for name in ("messages", "heartbeats", "learning", "skills", "relationships")
    ),
    "/api/llm/providers",
    "/api/llm/models",
    "/api/llm/settings",
    "/api/llm/settings/audit",
    "/api/llm/monitoring?period=month",
    "/api/budgets",
    "/api/budgets/alerts",
    "/costs",
    "/analytics",
    "/budgets",
]
"""Fleet-wide over 30 days: every route under /api/llm and /api/analytics that takes no
agent (the Costs page's charts and export, the Analytics page's charts, the LLM settings
page's monitoring), the Budgets page's, and the three pages."""


def exact_everywhere() -> Callable[[], None]:
    """Make the repositories rank the calls for every percentile (the path before the
    speed histograms) and sum each agent's calls for the model suggestions (the path
    before the rollup counted failed tasks); returns the undo."""
    from opencrab.store.repositories import agents as agents_repo
    from opencrab.store.repositories import llm_analytics, llm_monitoring
    from opencrab.store.repositories import metrics as metrics_repo

    speed, stats = llm_analytics.speed, llm_monitoring.latency_stats
    fleet = metrics_repo.fleet_task_model_sums

    def from_the_calls(conn: Any, *, since: Any, agent_id: str | None = None) -> Any:
        ids = [agent_id] if agent_id else list(agents_repo.agent_names(conn))
        found = {a: metrics_repo.calls_task_model_sums(conn, a, since=since) for a in ids}
        return {a: sums for a, sums in found.items() if sums}

    def exact_speed(conn: Any, flt: Any, *, exact: bool | None = None) -> Any:
        return speed(conn, flt, exact=True)

    def exact_stats(conn: Any, *, since: Any, exact: bool | None = None) -> Any:
        return stats(conn, since=since, exact=True)

    llm_analytics.speed = exact_speed  # type: ignore[assignment]
    llm_monitoring.latency_stats = exact_stats  # type: ignore[assignment]
    metrics_repo.fleet_task_model_sums = from_the_calls

    def undo() -> None:
        llm_analytics.speed = speed  # type: ignore[assignment]
        llm_monitoring.latency_stats = stats  # type: ignore[assignment]
        metrics_repo.fleet_task_model_sums = fleet

    return undo


def run(kind: str, url: str, data: str, args: argparse.Namespace) -> float:
    """Seed, then time every route and page; the slowest "now" median (ms)."""
    import sqlalchemy as sa
    from tests.fakes.scripted_provider import ScriptedProvider
    from tests.server.local import LocalClient

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.llm.router import LlmRouter
    from opencrab.server.app import create_app
    from opencrab.store import Database
    from opencrab.store.tables import llm_usage_daily, llm_usage_metrics, llm_usage_speed

    settings = load_settings(overrides={"data_dir": data, "database": {"url": url}})
    db = Database(url)
    db.upgrade()
    store = AgentStore(db, settings)
    ids = [
        store.create(AgentCreate(name=f"分析係{n:02d}", prompt="You help.")).id
        for n in range(args.agents)
    ]
    started = time.perf_counter()
    seed(db, ids, args.rows, args.days)
    print(
        f"\n== {kind}: {args.rows:,} metrics rows, {args.agents} agents, {args.days} days "
        f"stored in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    with db.read() as conn:
        sizes = [
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
            for t in (llm_usage_metrics, llm_usage_daily, llm_usage_speed)
        ]
    print(
        "llm_usage_metrics: {:,} rows; llm_usage_daily: {:,}; llm_usage_speed: {:,}".format(*sizes)
    )
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", "unused"))
    app = create_app(settings, db, router=router)
    slowest = 0.0
    with LocalClient(app) as client:

        def get(path: str) -> None:
            response = client.get(path)
            assert response.status_code == 200, (path, response.text[:300])

        print(f"{'route or page (fleet, 30 days)':<58} {'exact ms':>9} {'now ms':>8}  x faster")
        for path in ROUTES:
            undo = exact_everywhere()
            try:
                before = median_ms(lambda path=path: get(path), args.rounds)
            finally:
                undo()
            after = median_ms(lambda path=path: get(path), args.rounds)
            slowest = max(slowest, after)
            mark = "ok" if after <= 300 else "OVER 300"
            print(
                f"{path:<58} {before:9.1f} {after:8.1f}  {before / after:6.1f}  {mark}",
                flush=True,
            )
        if kind == "sqlite":
            bare_sql(db, client, ids, args.rounds)
    db.close()
    return slowest


def bare_sql(db: Any, client: Any, ids: list[str], rounds: int) -> None:
    """Each Costs chart's route against the same query by hand in bare SQL (SQLite)."""
    import sqlalchemy as sa

    from opencrab.store.tables import llm_usage_metrics

    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since = today - timedelta(days=29)
    stamp = sa.bindparam("since", type_=llm_usage_metrics.c.timestamp.type)
    first_day = since.strftime("%Y-%m-%d")
    agent = sa.bindparam("agent")
    cases = [
        ("last 30 days", {"days": "30"}, "", {}),
        (
            "one agent, 30 days",
            {"days": "30", "agentId": ids[7]},
            " AND agent_id = :agent",
            {"agent": ids[7]},
        ),
    ]
    worst = float("inf")
    with db.engine.connect() as bare:

        def statements(sql: str, where: str, params: dict[str, Any]) -> list[Any]:
            return [
                sa.text(part.format(w=where)).bindparams(
                    *(p for p in (stamp, agent) if p.key in params)
                )
                for part in sql.split("; ")
            ]

        def timed(texts: list[Any], params: dict[str, Any]) -> float:
            def run() -> None:
                for text in texts:
                    bare.execute(text, params).all()

            return median_ms(run, rounds)

        for label, query, extra, more in cases:
            print(
                f"\n{label}:  route ms / bare SQL of the same query ms  (ratio bare/route, "
                "target >= 0.5)  [table the route reads]  | the aggregate over the calls ms"
            )
            raw_params = {"since": since, **more}
            for name, sql in BARE.items():
                raw_texts = statements(sql, WHERE + extra, raw_params)
                if name in ROLLED:
                    table = "llm_usage_daily"
                    texts = statements(ROLLED[name], DAILY_WHERE + extra, more)
                    params = {"day": first_day, **more}
                else:
                    table, texts, params = "llm_usage_metrics", raw_texts, raw_params

                def run_route(name: str = name, query: dict[str, str] = query) -> None:
                    response = client.get(f"/api/analytics/llm/{name}", params=query)
                    assert response.status_code == 200, response.text[:300]

                route_ms = median_ms(run_route, rounds)
                bare_ms = timed(texts, params)
                raw_ms = timed(raw_texts, raw_params) if name in ROLLED else bare_ms
                ratio = bare_ms / route_ms
                worst = min(worst, ratio)
                print(
                    f"  {name:<11} {route_ms:9.1f} / {bare_ms:9.1f}   {ratio:5.2f} "
                    f"{'ok   ' if ratio >= 0.5 else 'UNDER'} [{table:<17}] | {raw_ms:9.1f}"
                )

    def first_chart() -> None:
        page = client.get("/costs")
        assert page.status_code == 200, page.text[:300]
        chart = client.get("/api/analytics/llm/cost", params={"days": "30"})
        assert chart.status_code == 200

    page_ms = median_ms(lambda: client.get("/costs"), rounds)
    total_ms = median_ms(first_chart, rounds)
    print(
        f"Costs page: server render {page_ms:.0f} ms; time to first chart "
        f"(page + first chart's JSON) {total_ms:.0f} ms"
    )
    print(f"worst ratio bare/route: {worst:.2f} {'ok' if worst >= 0.5 else 'UNDER'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--db", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"]
    )
    args = parser.parse_args()
    from tests.fakes.postgres import ENV_URL, postgres_server

    slowest: dict[str, float] = {}
    for kind in args.db:
        with tempfile.TemporaryDirectory() as data:
            if kind == "sqlite":
                slowest[kind] = run(kind, f"sqlite:///{data}/opencrab.db", data, args)
                continue
            with postgres_server(os.environ.get(ENV_URL)) as server:
                url = server.create_database()
                try:
                    slowest[kind] = run(kind, url, data, args)
                finally:
                    server.drop_database(url)
    for kind, ms in slowest.items():
        print(f"{kind}: slowest route or page now {ms:.0f} ms ({'ok' if ms <= 300 else 'OVER'})")


if __name__ == "__main__":
    main()
