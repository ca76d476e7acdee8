"""The daily rollup `llm_usage_daily` equals the sums over `llm_usage_metrics` per UTC day
and key after every way calls are written: the recorder, the router's failed attempts,
the importer, re-pricing, ratings, and the migration's backfill (both databases)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.errors import ProviderServerError, RateLimited
from opencrab.importers.store import Importer
from opencrab.llm.metrics import CallRecord, MetricsRecorder
from opencrab.llm.pricing import ModelPrice, reprice, save_price
from opencrab.llm.router import CallInfo, LlmRouter
from opencrab.llm.types import ChatRequest, Message
from opencrab.store import Database
from opencrab.store.bulk import bulk_insert
from opencrab.store.dialects import postgresql, sqlite
from opencrab.store.repositories import llm_analytics
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.tables import llm_usage_daily, llm_usage_metrics
from opencrab.store.types import format_timestamp
from tests.fakes.corpora import CODEX_FILES
from tests.fakes.scripted_provider import ScriptedProvider

M = llm_usage_metrics.c
SUMS = metrics_repo.DAILY_SUMS
FLOATS = {"cost_usd", "quality_sum"}


def from_calls(db: Database) -> dict[tuple[str, ...], dict[str, Any]]:
    """The rollup as SQL over the calls computes it."""
    with db.read() as conn:
        dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
        day = dialect.utc_day(M.timestamp)
        task = sa.func.coalesce(M.task_type, "")
        keys = (day, M.agent_id, M.provider, M.model, M.purpose, task, M.status)
        query = sa.select(
            *keys,
            sa.func.count(),
            sa.func.sum(M.input_tokens),
            sa.func.sum(M.output_tokens),
            sa.func.sum(M.total_tokens),
            sa.func.sum(M.cache_read_tokens),
            sa.func.sum(M.cache_write_tokens),
            sa.func.sum(M.reasoning_tokens),
            sa.func.sum(M.estimated_cost_usd),
            sa.func.coalesce(sa.func.sum(M.quality_score), 0.0),
            sa.func.count(M.quality_score),
            sa.func.sum(M.latency_ms),
            sa.func.coalesce(sa.func.sum(M.time_to_first_token_ms), 0),
            sa.func.count(M.time_to_first_token_ms),
            sa.func.sum(sa.case((M.task_success == sa.false(), 1), else_=0)),
        ).group_by(*keys)
        return {
            tuple(str(v) for v in row[:7]): dict(zip(SUMS, row[7:], strict=True))
            for row in conn.execute(query)
        }


def rolled(db: Database) -> dict[tuple[str, ...], dict[str, Any]]:
    """The rollup as stored."""
    with db.read() as conn:
        rows = conn.execute(sa.select(llm_usage_daily)).all()
    return {
        tuple(str(getattr(r, k)) for k in metrics_repo.DAILY_KEYS): {s: getattr(r, s) for s in SUMS}
        for r in rows
    }


def assert_in_step(db: Database) -> dict[tuple[str, ...], dict[str, Any]]:
    """The rollup equals the sums over the calls, key by key (floats to rounding)."""
    want, have = from_calls(db), rolled(db)
    assert want, "no calls stored"
    assert set(have) == set(want)
    for key, sums in want.items():
        for name, value in sums.items():
            if name in FLOATS:
                assert have[key][name] == pytest.approx(float(value), rel=1e-12), (key, name)
            else:
                assert int(have[key][name]) == int(value), (key, name)
    return want


def call(**fields: Any) -> CallRecord:
    base: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "agent_id": "a1",
        "provider": "openai",
        "model": "gpt-5-mini",
        "purpose": "conversation",
    }
    base.update(fields)
    return CallRecord(**base)


TOKYO = timezone(timedelta(hours=9))


def mixed_calls() -> list[CallRecord]:
    """Calls over three UTC days, with and without task type, quality and TTFT."""
    # 08:30 in Tokyo on the 2nd is 23:30 UTC on the 1st: the UTC day counts
    first = datetime(2026, 3, 2, 8, 30, tzinfo=TOKYO)
    out = []
    for n in range(40):
        out.append(
            call(
                agent_id=f"a{n % 3}",
                timestamp=first + timedelta(hours=n),
                model=("gpt-5-mini", "gpt-5.2")[n % 2],
                task_type=(None, "chat", "reflection")[n % 3],
                input_tokens=100 + n,
                output_tokens=10 * n,
                total_tokens=100 + 11 * n,
                cache_read_tokens=n,
                cache_write_tokens=n % 5,
                reasoning_tokens=n % 7,
                estimated_cost_usd=0.001 * n + 1e-7,
                latency_ms=50 + n,
                time_to_first_token_ms=None if n % 4 else 20 + n,
                status="ok" if n % 6 else "error",
                quality_score=None if n % 5 else n / 40,
                task_success=None if n % 5 else n % 10 != 0,  # 0, 10, 20, 30 failed
            )
        )
    return out


def test_the_recorders_calls_add_up(any_db: Database) -> None:
    recorder = MetricsRecorder(any_db)
    recorder.write(mixed_calls())
    recorder.write(mixed_calls()[:10])  # the same keys again: added, not replaced
    want = assert_in_step(any_db)
    first_day = ("2026-03-01", "a0", "openai", "gpt-5-mini", "conversation", "", "error")
    assert want[first_day]["calls"] == 2  # 23:30 UTC on the 1st, written twice
    assert len(want) < 50  # keys shared by calls: one rollup row for them


async def test_the_routers_failed_attempts_add_up(any_db: Database, settings: Settings) -> None:
    recorder = MetricsRecorder(any_db)
    router = LlmRouter(settings, metrics=recorder)
    for name in ("openai", "anthropic", "openrouter", "google"):
        router.register_provider(ScriptedProvider(name, f"hello from {name}"))
    openai = router.providers["openai"]
    assert isinstance(openai, ScriptedProvider)
    openai.outcomes.clear()
    openai.outcomes.append(RateLimited("slow down", provider="openai", status=429))
    anthropic = router.providers["anthropic"]
    assert isinstance(anthropic, ScriptedProvider)
    anthropic.outcomes.clear()
    anthropic.outcomes.append(ProviderServerError("HTTP 500", provider="anthropic", status=500))
    router.set_fallback_chain(["anthropic", "openrouter"])
    answer = await router.chat(
        ChatRequest(model="fast", messages=[Message.user("hi")]),
        CallInfo(purpose="analysis", task_type="summary"),
    )
    assert answer.provider == "openrouter"
    await recorder.flush()
    want = assert_in_step(any_db)
    assert sorted((k[2], k[6], v["calls"]) for k, v in want.items()) == [
        ("anthropic", "error", 1),
        ("openai", "error", 1),
        ("openrouter", "ok", 1),
    ]
    await recorder.aclose()


def test_the_importers_calls_add_up(any_db: Database, tmp_path: Path) -> None:
    settings = load_settings(None, overrides={"data_dir": str(tmp_path)})
    agent = AgentStore(any_db, settings).create(AgentCreate(name="coder", prompt="You code."))
    Importer(any_db, "codex", agent_id=agent.id).run([CODEX_FILES[0].parent])
    want = assert_in_step(any_db)
    assert {k[4] for k in want} == {"import"}
    assert sum(v["calls"] for v in want.values()) > 10


def test_rows_in_the_drivers_form_add_up_as_the_same_calls_do(any_db: Database) -> None:
    """insert_bound (the importer's: each row's timestamp given in storage form too)
    stores what insert stores and rolls it up alike."""
    rows = [record.as_row() for record in mixed_calls()]
    with any_db.write() as conn:
        metrics_repo.insert(conn, rows)
    stored = from_calls(any_db)
    with any_db.write() as conn:
        conn.execute(llm_usage_daily.delete())
        conn.execute(llm_usage_metrics.delete())
    again = [row._replace(id=str(uuid.uuid4())) for row in rows]
    stamps = [format_timestamp(row.timestamp) for row in rows]
    assert "2026-03-01T23:30:00.000000Z" in stamps  # 08:30 in Tokyo on the 2nd
    with any_db.write() as conn:
        metrics_repo.insert_bound(conn, again, stamps)
    assert assert_in_step(any_db) == stored
    with any_db.read() as conn:
        have = conn.execute(sa.select(M.timestamp, M.created_at).order_by(M.timestamp)).all()
    assert have == sorted((row.timestamp, row.created_at) for row in rows)


def test_rows_in_the_drivers_form_keep_their_own_creation_time(any_db: Database) -> None:
    """insert_bound writes one stamp for both times, so a row whose created_at is not its
    timestamp is refused rather than stored with the wrong one."""
    row = mixed_calls()[0].as_row()
    later = row._replace(created_at=row.timestamp + timedelta(seconds=1))
    with any_db.write() as conn, pytest.raises(ValueError, match="created_at"):
        metrics_repo.insert_bound(conn, [later], [format_timestamp(later.timestamp)])
    assert from_calls(any_db) == {}


def test_repricing_and_ratings_change_the_rollup_too(any_db: Database) -> None:
    calls = mixed_calls()
    for c in calls:
        c.cost_source = "unknown"
    MetricsRecorder(any_db).write(calls)
    with any_db.write() as conn:
        price = ModelPrice("openai", "gpt-5.2", 3.0, 30.0, cache_read_price_per_1m=0.3)
        save_price(conn, price)
        assert reprice(conn, price) == 20
    assert_in_step(any_db)
    with any_db.write() as conn:  # rated, then rated again: the new rating replaces the old
        for c, score, success in (
            (calls[1], 0.25, False),
            (calls[1], 0.75, True),
            (calls[2], 1.0, False),
            (calls[3], 0.5, False),
            (calls[10], 0.5, True),  # rated a failed task when stored: now a success
        ):
            assert metrics_repo.evaluate(
                conn,
                c.id,
                c.agent_id,
                quality_score=score,
                task_success=success,
                self_evaluation="fine",
                would_use_again=None,
                better_model_suggestion=None,
            )
        assert not metrics_repo.evaluate(  # not this agent's call: nothing changes
            conn,
            calls[3].id,
            "someone else",
            quality_score=0.5,
            task_success=True,
            self_evaluation="fine",
            would_use_again=None,
            better_model_suggestion=None,
        )
    want = assert_in_step(any_db)
    assert sum(v["quality_count"] for v in want.values()) == 8 + 3
    # stored: calls 0, 10, 20 and 30 failed; now 2 and 3 too, 10 no more (1: then not)
    assert sum(v["failed_tasks"] for v in want.values()) == 4 + 2 - 1


def test_the_migration_backfills_the_stored_calls(store_url: str) -> None:
    db = Database(store_url)
    db.upgrade("0024")
    rows = [c.as_row() for c in mixed_calls()]
    with db.write() as conn:  # written before the rollup existed
        bulk_insert(conn, llm_usage_metrics, metrics_repo.COLUMNS, rows)
    db.upgrade()
    assert_in_step(db)
    MetricsRecorder(db).write(mixed_calls())  # and kept in step from then on
    assert_in_step(db)
    db.close()


def test_whole_day_filters_read_the_rollup_and_others_the_calls(any_db: Database) -> None:
    MetricsRecorder(any_db).write(mixed_calls())
    stray = call(timestamp=datetime(2026, 3, 2, 12, tzinfo=UTC), estimated_cost_usd=5.0)
    with any_db.write() as conn:  # a row written around the repository: the rollup lacks it
        bulk_insert(conn, llm_usage_metrics, metrics_repo.COLUMNS, [stray.as_row()])
    day = datetime(2026, 3, 2, tzinfo=UTC)
    whole = llm_analytics.UsageFilter(since=day, until=day + timedelta(days=1))
    hours = llm_analytics.UsageFilter(since=day, until=day + timedelta(hours=23))
    assert whole.whole_days
    assert not hours.whole_days
    with any_db.read() as conn:
        by_day = sum(r.cost_usd for r in llm_analytics.rollup(conn, whole))
        by_hour = sum(r.cost_usd for r in llm_analytics.rollup(conn, hours))
    assert by_day < 1.0 < 5.0 < by_hour
