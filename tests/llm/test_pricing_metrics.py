"""Pricing lookup rules, the seeded price table, metrics rows and summaries."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.errors import ValidationError
from opencrab.llm.metrics import CallRecord, MetricsRecorder, period_start
from opencrab.llm.pricing import ModelPrice, PriceBook, default_prices, reprice, save_price
from opencrab.llm.types import Usage
from opencrab.reports.llm_metrics import usage_groups
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.tables import llm_usage_metrics, model_pricing

MILLION = Usage.of(1_000_000, 1_000_000)


@pytest.fixture
def db(any_db: Database) -> Database:
    """Every metrics test here runs on SQLite and on PostgreSQL."""
    return any_db


def test_migration_seeds_the_seed_price_table(db: Database) -> None:
    with db.read() as conn:
        stored = PriceBook([ModelPrice(*row) for row in metrics_repo.prices(conn)])
    for default in default_prices():  # the built-in providers' declared prices
        model = default.model.replace("*", "x")
        price = stored.find(default.provider, model)
        assert price is not None, (default.provider, default.model)
        assert price.model.split("/")[-1] == default.model.split("/")[-1]
        assert (price.input_price_per_1m, price.output_price_per_1m) == (
            default.input_price_per_1m,
            default.output_price_per_1m,
        )
        assert price.context_window == default.context_window
        assert (price.cache_read_price_per_1m, price.cache_write_price_per_1m) == (
            default.cache_read_price_per_1m,
            default.cache_write_price_per_1m,
        )


def test_a_model_the_table_has_no_row_for_costs_its_providers_default(db: Database) -> None:
    """The stored table wins; a declared default fills in what it lacks."""
    with db.write() as conn:
        conn.execute(sa.delete(model_pricing).where(model_pricing.c.model == "gpt-5-mini"))
        save_price(conn, ModelPrice("openai", "gpt-5.2", 9.0, 9.0))
        book = PriceBook.load(conn)
    assert book.cost("openai", "gpt-5-mini", MILLION) == (0.25 + 2.00, "pricing")
    assert book.cost("openai", "gpt-5.2", MILLION) == (18.0, "pricing")


@pytest.mark.parametrize(
    ("provider", "model", "usage", "expected"),
    [
        # OpenAI: 900k of 1M prompt tokens cached at a tenth of the input rate
        (
            "openai",
            "gpt-5.2",
            Usage.of(1_000_000, 10_000, cache_read_tokens=900_000),
            0.1 * 1.75 + 0.9 * 0.175 + 0.01 * 14.00,
        ),
        # Anthropic: reads at 0.1x, writes at 1.25x, the rest at the input rate
        (
            "anthropic",
            "claude-sonnet-4-5-20250929",
            Usage.of(1_000_000, 0, cache_read_tokens=600_000, cache_write_tokens=300_000),
            0.1 * 3.00 + 0.6 * 0.30 + 0.3 * 3.75,
        ),
        # no cache rate (gpt-5.2-pro): cached tokens cost what other input costs
        (
            "openai",
            "gpt-5.2-pro",
            Usage.of(1_000_000, 0, cache_read_tokens=900_000),
            21.00,
        ),
        # counts beyond the input total are capped to it: nothing is billed twice
        (
            "anthropic",
            "claude-haiku-4.5",
            Usage.of(1_000_000, 0, cache_read_tokens=800_000, cache_write_tokens=800_000),
            0.8 * 0.10 + 0.2 * 1.25,
        ),
        ("openai", "gpt-5-mini", Usage.of(1_000_000, 0, cache_read_tokens=-5), 0.25),
    ],
)
def test_cached_input_costs_the_cache_rates(
    provider: str, model: str, usage: Usage, expected: float
) -> None:
    cost, source = PriceBook.defaults().cost(provider, model, usage)
    assert cost == pytest.approx(expected)
    assert source == "pricing"


def test_cache_rates_are_filled_only_where_the_seeded_price_was_kept(tmp_path: Path) -> None:
    """Migration 0007 leaves a price someone changed as it is."""
    db = Database(f"sqlite:///{tmp_path / 'prices.db'}")
    db.upgrade("0006")
    with db.write() as conn:
        conn.execute(
            model_pricing.update()
            .where(model_pricing.c.provider == "openai", model_pricing.c.model == "gpt-5.2")
            .values(input_price_per_1m=2.0)
        )
    db.upgrade()
    with db.read() as conn:
        book = PriceBook.load(conn)
    changed = book.find("openai", "gpt-5.2")
    kept = book.find("openai", "gpt-5-mini")
    assert changed is not None
    assert kept is not None
    assert (changed.input_price_per_1m, changed.cache_read_price_per_1m) == (2.0, None)
    assert kept.cache_read_price_per_1m == 0.025
    db.close()


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-5.2", 1.75 + 14.00),
        ("openai", "gpt-5.2-pro", 21.00 + 168.00),
        ("anthropic", "claude-opus-4.6", 5.00 + 25.00),
        ("google", "gemini-2.5-flash-lite", 0.10 + 0.40),
        ("openrouter", "deepseek/deepseek-v3.2", 0.25 + 0.38),  # routed id → vendor row
        ("openrouter", "anthropic/claude-haiku-4.5", 1.00 + 5.00),
        ("openrouter", "free/qwen3-coder", 0.0),
        ("openrouter", "meta-llama/llama-3.3-70b-instruct:free", 0.0),
        ("openrouter", "deepseek/deepseek-v3.2:free", 0.0),  # free variant of a priced model
        ("ollama", "llama3.3:70b", 0.0),
        ("embedded", "smollm2-135m-instruct", 0.0),
    ],
)
def test_lookup_rules(provider: str, model: str, expected: float) -> None:
    cost, source = PriceBook.defaults().cost(provider, model, MILLION)
    assert cost == pytest.approx(expected)
    assert source == "pricing"


def test_unknown_models_cost_nothing_but_say_so() -> None:
    assert PriceBook.defaults().cost("openai", "gpt-unknown", MILLION) == (0.0, "unknown")
    assert PriceBook.defaults().cost("openai", "gpt-unknown", MILLION, reported=0.5) == (
        0.5,
        "provider",
    )


def test_a_provider_the_table_does_not_know_costs_what_the_model_costs() -> None:
    book = PriceBook.defaults()
    # Codex names the endpoint agent mode gives it after its config section, "opencrab"
    assert book.cost("opencrab", "gpt-5.2-codex", MILLION) == (
        pytest.approx(1.75 + 14.00),
        "pricing",
    )
    assert book.cost("my-proxy", "claude-sonnet-4-5-20250929", MILLION)[1] == "pricing"
    # a provider the table knows keeps its own rows: no borrowing from another
    assert book.cost("ollama", "gpt-5.2", MILLION) == (0.0, "pricing")
    assert book.cost("openai", "claude-opus-4.6", MILLION) == (0.0, "unknown")
    assert book.cost("opencrab", "gpt-unknown", MILLION) == (0.0, "unknown")


def test_a_model_two_providers_price_differently_stays_unknown() -> None:
    book = PriceBook([*PriceBook.defaults().prices(), ModelPrice("azure", "gpt-5.2", 9.0, 9.0)])
    assert book.cost("opencrab", "gpt-5.2", MILLION) == (0.0, "unknown")


def record(**fields: object) -> CallRecord:
    base: dict[str, object] = {
        "id": str(uuid.uuid4()),
        "provider": "openai",
        "model": "gpt-5-mini",
        "purpose": "conversation",
    }
    base.update(fields)
    return CallRecord(**base)  # type: ignore[arg-type]


async def test_recorder_writes_in_the_background_and_flushes(db: Database) -> None:
    recorder = MetricsRecorder(db)
    for i in range(300):  # more than one batch
        recorder.record(record(latency_ms=i, estimated_cost_usd=0.001))
    await recorder.flush()
    groups = usage_groups(db, group_by="model")
    assert [(g.key, g.calls) for g in groups] == [("gpt-5-mini", 300)]
    assert groups[0].cost_usd == pytest.approx(0.3)
    await recorder.aclose()


def test_summaries_by_group_and_period(db: Database) -> None:
    now = datetime.now(UTC)
    recorder = MetricsRecorder(db)
    recorder.write(
        [
            record(model="gpt-5-mini", purpose="analysis", task_type="summary", input_tokens=100,
                   output_tokens=10, total_tokens=110, estimated_cost_usd=0.01, latency_ms=100),
            record(model="gpt-5-mini", purpose="analysis", task_type="summary", input_tokens=300,
                   output_tokens=30, total_tokens=330, estimated_cost_usd=0.03, latency_ms=300),
            record(model="claude-opus-4.6", provider="anthropic", purpose="thinking",
                   task_type="plan", estimated_cost_usd=0.5, latency_ms=900, quality_score=0.9),
            record(model="claude-opus-4.6", provider="anthropic", purpose="thinking",
                   status="error", error_type="rate_limited", latency_ms=5),
            record(model="gpt-5.2", purpose="conversation", estimated_cost_usd=9.0,
                   timestamp=now - timedelta(days=10), agent_id="agent-old"),
        ]
    )  # fmt: skip
    by_model = {g.key: g for g in usage_groups(db, group_by="model", since=period_start("week"))}
    assert set(by_model) == {"gpt-5-mini", "claude-opus-4.6"}
    mini, opus = by_model["gpt-5-mini"], by_model["claude-opus-4.6"]
    assert (mini.calls, mini.errors, mini.input_tokens, mini.total_tokens) == (2, 0, 400, 440)
    assert mini.cost_usd == pytest.approx(0.04)
    assert mini.avg_latency_ms == pytest.approx(200)
    assert (opus.calls, opus.errors) == (2, 1)
    assert opus.avg_latency_ms == pytest.approx(900)  # failed attempts do not count for speed
    assert opus.avg_quality == pytest.approx(0.9)
    assert next(g.key for g in usage_groups(db, group_by="model")) == "gpt-5.2"  # costliest first
    assert {g.key for g in usage_groups(db, group_by="purpose", since=period_start("day"))} == {
        "analysis",
        "thinking",
    }
    assert {g.key: g.calls for g in usage_groups(db, group_by="task_type")} == {
        "summary": 2,
        "plan": 1,
        None: 2,
    }
    assert [g.key for g in usage_groups(db, group_by="agent", agent_id="agent-old")] == [
        "agent-old"
    ]
    days = usage_groups(db, group_by="day")
    assert {g.key for g in days} == {
        now.strftime("%Y-%m-%d"),
        (now - timedelta(days=10)).strftime("%Y-%m-%d"),
    }
    assert usage_groups(db, group_by="model", since=period_start("30d"))[0].key == "gpt-5.2"


def test_day_and_week_keys_are_utc_dates_on_every_database(db: Database) -> None:
    if db.dialect == "postgresql":  # a server whose time zone is not UTC
        with db.write() as conn:
            name = conn.execute(sa.text("SELECT current_database()")).scalar_one()
            conn.execute(sa.text(f"ALTER DATABASE \"{name}\" SET timezone TO 'Asia/Tokyo'"))
        db.engine.dispose()
        with db.read() as conn:
            assert conn.execute(sa.text("SHOW timezone")).scalar_one() == "Asia/Tokyo"
    sunday_late = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)  # Monday 08:30 in Tokyo
    monday = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)
    MetricsRecorder(db).write(
        [
            record(timestamp=sunday_late, estimated_cost_usd=0.2),
            record(timestamp=monday, estimated_cost_usd=0.1),
            record(timestamp=monday + timedelta(hours=1), estimated_cost_usd=0.1),
        ]
    )
    days = {g.key: g.calls for g in usage_groups(db, group_by="day")}
    assert days == {"2026-03-01": 1, "2026-03-02": 2}
    weeks = {g.key: g.calls for g in usage_groups(db, group_by="week")}  # by the week's Monday
    assert weeks == {"2026-02-23": 1, "2026-03-02": 2}


def test_periods_and_groupings_are_validated(db: Database) -> None:
    now = datetime(2026, 2, 10, tzinfo=UTC)
    assert period_start("all", now) is None
    assert period_start("day", now) == now - timedelta(days=1)
    assert period_start("month", now) == now - timedelta(days=30)
    assert period_start("24h", now) == now - timedelta(hours=24)
    assert period_start("2w", now) == now - timedelta(weeks=2)
    for bad in ("fortnight", "0d", "-1d", "d"):
        with pytest.raises(ValidationError, match="unknown period"):
            period_start(bad, now)
    with pytest.raises(ValidationError, match="unknown grouping"):
        usage_groups(db, group_by="colour")


def test_reprice_covers_what_the_new_row_prices_and_keeps_reported_costs(db: Database) -> None:
    MetricsRecorder(db).write(
        [
            record(provider="openai", model="gpt-6-2027-01-01", input_tokens=1_000_000,
                   cache_read_tokens=500_000, cost_source="unknown"),
            record(provider="openai", model="gpt-6-mini", input_tokens=1_000_000,
                   cost_source="unknown"),  # another row will price it
            record(provider="openai", model="gpt-6", output_tokens=1_000_000,
                   estimated_cost_usd=7.0, cost_source="provider"),
            record(provider="anthropic", model="gpt-6", input_tokens=1_000_000,
                   cost_source="unknown"),  # another provider
        ]
    )  # fmt: skip
    new = ModelPrice("openai", "gpt-6*", 4.0, 20.0, cache_read_price_per_1m=0.4)
    mini = ModelPrice("openai", "gpt-6-mini", 1.0, 5.0)
    with db.write() as conn:
        save_price(conn, mini)
        save_price(conn, new)
        assert reprice(conn, new) == 1  # the dated snapshot (the pattern covers it)
        save_price(conn, ModelPrice("openai", "gpt-6*", 4.0, 20.0))  # replaced, not added
    with db.read() as conn:
        costs = {
            (r.provider, r.model): (r.estimated_cost_usd, r.cost_source)
            for r in conn.execute(sa.select(llm_usage_metrics))
        }
        rows = conn.execute(sa.select(model_pricing).where(model_pricing.c.model == "gpt-6*")).all()
    assert costs["openai", "gpt-6-2027-01-01"] == (pytest.approx(0.5 * 4.0 + 0.5 * 0.4), "pricing")
    assert costs["openai", "gpt-6-mini"] == (0.0, "unknown")  # its own row, not repriced
    assert costs["openai", "gpt-6"] == (7.0, "provider")
    assert costs["anthropic", "gpt-6"] == (0.0, "unknown")
    assert [(r.input_price_per_1m, r.cache_read_price_per_1m) for r in rows] == [(4.0, None)]


@pytest.mark.parametrize(
    ("price", "named"),
    [
        (ModelPrice("", "m", 1.0, 1.0), "provider must be"),
        (ModelPrice("p", "m", -0.5, 1.0), "input price"),
        (ModelPrice("p", "m", 1.0, float("inf")), "output price"),
        (ModelPrice("p", "m", 1.0, 1.0, cache_read_price_per_1m=float("nan")), "cache read"),
        (ModelPrice("p", "m", 1.0, 1.0, cache_write_price_per_1m=-1), "cache write"),
        (ModelPrice("p", "m", 1.0, 1.0, context_window=0), "context window"),
    ],
)
def test_bad_prices_are_refused(db: Database, price: ModelPrice, named: str) -> None:
    with pytest.raises(ValidationError, match=named), db.write() as conn:
        save_price(conn, price)
    with db.read() as conn:
        assert (
            conn.execute(
                sa.select(model_pricing).where(model_pricing.c.provider == price.provider)
            ).first()
            is None
        )
