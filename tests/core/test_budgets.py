"""Budgets (core/budgets.py) against the real router and the fake OpenAI server, with
costs priced from the usage it reports: each cap (an agent's daily and monthly, the
fleet's daily and monthly, a ticket's maxCostUsd within a turn) refuses the call after
the one that crossed it, so none is exceeded by more than one call; alerts at 80 % and
100 % are recorded once and POSTed to a webhook; the forecast, at fixed times."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from uuid import UUID

import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate, HeartbeatConfig, SessionHome
from opencrab.core.budgets import Budgets, CostCap, day_start, forecast, month_start, next_month
from opencrab.core.heartbeat import heartbeat_scheduler, pulse_for
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.core.steps import TurnResult
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.messages import IncomingMessage, InternalSource
from opencrab.store import Database
from opencrab.store.repositories import budgets as budgets_repo
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.tables import budget_alerts, llm_usage_daily, llm_usage_metrics
from tests.core.conftest import speak
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.metrics_rows import usage_rows
from tests.fakes.openai_bodies import completion
from tests.fakes.scripted_provider import ScriptedProvider, reply

CHAT = "/v1/chat/completions"
USAGE = {"prompt_tokens": 20_000, "completion_tokens": 4_000, "total_tokens": 24_000}


@pytest.fixture
def live_settings(
    data_dir: Any, fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    monkeypatch.setenv("OPENCRAB_LLM__DEFAULT_PROVIDER", "openai")
    return load_settings()


@asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[Runtime]:
    """A runtime whose router has the configured providers (OpenAI: the fake server)."""
    db = Database(settings.database_url)
    db.upgrade()
    recorder = MetricsRecorder(db)
    router = LlmRouter.from_settings(settings, metrics=recorder)
    async with Runtime.open(settings, db=db, router=router) as rt:
        yield rt
    await recorder.aclose()
    db.close()


@pytest.fixture
async def live(live_settings: Settings) -> AsyncIterator[Runtime]:
    async with opened(live_settings) as rt:
        yield rt


def answer(server: FakeLlmServer, text: str = "done") -> None:
    server.reply(CHAT, Reply(json=completion({"content": text}, usage=USAGE)))


def tool_loop(server: FakeLlmServer) -> None:
    """Every reply calls ws_list again: a turn that would go on calling the model."""
    call = {"id": "call_1", "type": "function", "function": {"name": "ws_list", "arguments": "{}"}}
    body = completion({"content": None, "tool_calls": [call]}, finish="tool_calls", usage=USAGE)
    server.reply(CHAT, Reply(json=body))


def make(rt: Runtime, name: str, **llm: Any) -> Agent:
    """An agent on gpt-5-mini (a priced model) with these LLM settings."""
    config = AgentLlmConfig(default_provider="openai", default_model="gpt-5-mini", **llm)
    return rt.agents.create(AgentCreate(name=name, prompt="p", llm=config))


async def chat(rt: Runtime, agent: Agent) -> TurnResult:
    return await rt.chat(agent, "hi")


def spent(db: Database, agent_id: str | None = None) -> tuple[float, int]:
    m = llm_usage_metrics.c
    query = sa.select(sa.func.coalesce(sa.func.sum(m.estimated_cost_usd), 0.0), sa.func.count())
    if agent_id is not None:
        query = query.where(m.agent_id == agent_id)
    with db.read() as conn:
        total, n = conn.execute(query).one()
    return float(total), int(n)


async def one_call_cost(rt: Runtime, server: FakeLlmServer) -> float:
    """What one call costs at USAGE: priced by the router, read back from its metrics row."""
    probe = make(rt, "probe")
    answer(server)
    assert (await chat(rt, probe)).error is None
    await rt.router.metrics.flush()  # type: ignore[union-attr]
    cost, calls = spent(rt.db, probe.id)
    assert calls == 1
    assert cost > 0
    rt.agents.delete(probe.id)
    with rt.db.write() as conn:  # the probe's spend is not the fleet's in these tests
        conn.execute(llm_usage_metrics.delete())
        conn.execute(llm_usage_daily.delete())  # and its rollup, which the checks read
    return cost


async def until_refused(rt: Runtime, server: FakeLlmServer, agents: list[Agent]) -> int:
    """Chat turns round-robin until one is refused by a budget; the model calls made."""
    before = len(server.requests_to(CHAT))
    for i in range(20):
        result = await chat(rt, agents[i % len(agents)])
        if result.error is not None:
            assert result.error.error == "budget_exceeded", result.error
            return len(server.requests_to(CHAT)) - before
    raise AssertionError("no budget refused a call")


@pytest.mark.parametrize("field", ["daily_budget_usd", "monthly_budget_usd"])
async def test_an_agents_cap_is_exceeded_by_at_most_one_call(
    live: Runtime, fake_llm_server: FakeLlmServer, field: str
) -> None:
    cost = await one_call_cost(live, fake_llm_server)
    cap = cost * 2.5
    agent = make(live, "saki", **{field: cap})
    answer(fake_llm_server)
    assert await until_refused(live, fake_llm_server, [agent]) == 3  # 3c crosses 2.5c
    total, _ = spent(live.db, agent.id)
    assert cap <= total <= cap + cost
    refused = await chat(live, agent)  # and stays refused
    assert refused.error is not None
    assert "budget" in refused.error.message


@pytest.mark.parametrize("field", ["fleet_daily_usd", "fleet_monthly_usd"])
async def test_the_fleet_cap_is_exceeded_by_at_most_one_call(
    live: Runtime, fake_llm_server: FakeLlmServer, field: str
) -> None:
    cost = await one_call_cost(live, fake_llm_server)
    cap = cost * 3.5
    daily, monthly = (cap, None) if field == "fleet_daily_usd" else (None, cap)
    Budgets(live.db, live.settings).set_fleet_caps(daily, monthly)
    a, b = make(live, "a"), make(live, "b")
    answer(fake_llm_server)
    assert await until_refused(live, fake_llm_server, [a, b]) == 4
    total, _ = spent(live.db)
    assert cap <= total <= cap + cost
    for agent in (a, b):  # the fleet's cap stops every agent
        result = await chat(live, agent)
        assert result.error is not None
        assert "the fleet has spent" in result.error.message


async def test_a_ticket_cap_stops_a_turn_between_its_calls(
    live: Runtime, fake_llm_server: FakeLlmServer
) -> None:
    cost = await one_call_cost(live, fake_llm_server)
    agent = make(live, "worker")
    fake_llm_server.reset()
    tool_loop(fake_llm_server)  # without the cap the turn would call the model 30 times
    session_id = "00000000-0000-4000-8000-000000000001"
    # the stretch's earlier turns spent 0.25c; each call's estimate (about 0.26c: the
    # fake's usage is far above the prompt's) must fit under 1.6c before it runs
    cap = CostCap(cost * 1.6, spent_usd=cost * 0.25)
    message = IncomingMessage.text("go", source=InternalSource(origin="ticket"))
    result = await live.turns.run(agent, message, session_id=session_id, cost_cap=cap)
    assert result.error is not None
    assert result.error.error == "budget_exceeded"
    assert "maxCostUsd" in result.error.message
    assert len(fake_llm_server.requests_to(CHAT)) == 2  # 2 calls cross 1.6; the 3rd refused
    total, _ = spent(live.db, agent.id)
    assert cap.limit_usd <= cap.spent_usd + total <= cap.limit_usd + cost


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    handler = type("Hook", (_Hook,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/alerts", received
    server.shutdown()
    server.server_close()


async def test_alerts_at_80_and_100_percent_are_recorded_once_and_posted(
    live_settings: Settings,
    fake_llm_server: FakeLlmServer,
    webhook: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, received = webhook
    monkeypatch.setenv("OPENCRAB_BUDGETS__WEBHOOK_URL", url)
    settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    recorder = MetricsRecorder(db)
    async with Runtime.open(
        settings, db=db, router=LlmRouter.from_settings(settings, metrics=recorder)
    ) as rt:
        cost = await one_call_cost(rt, fake_llm_server)
        # one call: 53 %; two: 105 % (each estimate, about 0.26 of a call, fit before it)
        agent = make(rt, "yui", daily_budget_usd=cost * 1.9)
        answer(fake_llm_server)
        assert (await chat(rt, agent)).error is None
        assert (await chat(rt, agent)).error is None
        refused = await chat(rt, agent)  # the check saw 105 %: refused, alerts at 80 and 100 %
        assert refused.error is not None
        assert (await chat(rt, agent)).error is not None  # no second alert
        for _ in range(200):
            if len(received) >= 2:
                break
            await asyncio.sleep(0.05)
    with db.read() as conn:
        rows = conn.execute(sa.select(budget_alerts).order_by(budget_alerts.c.threshold)).all()
    db.close()
    assert [(r.scope, r.cap, r.threshold) for r in rows] == [
        (agent.id, "daily", 80),
        (agent.id, "daily", 100),
    ]
    assert rows[0].period == datetime.now(UTC).strftime("%Y-%m-%d")
    assert sorted(p["thresholdPercent"] for p in received) == [80, 100]
    first = next(p for p in received if p["thresholdPercent"] == 80)
    assert first["agentName"] == "yui"
    assert first["scope"] == "agent"
    assert first["cap"] == "daily"
    assert "sk-test" not in json.dumps(received)


async def test_a_webhook_that_fails_never_blocks_the_turn(
    live_settings: Settings, fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCRAB_BUDGETS__WEBHOOK_URL", "http://127.0.0.1:9/closed")
    settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    recorder = MetricsRecorder(db)
    async with Runtime.open(
        settings, db=db, router=LlmRouter.from_settings(settings, metrics=recorder)
    ) as rt:
        agent = make(rt, "ren", daily_budget_usd=0.0)  # 100 % before the first call
        answer(fake_llm_server)
        result = await chat(rt, agent)
        assert result.error is not None
        assert result.error.error == "budget_exceeded"
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(budget_alerts)).scalar() == 2
    db.close()


def test_the_forecast_extrapolates_the_rate_so_far() -> None:
    now = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)  # a quarter of the day gone
    day = day_start(now)
    assert day == datetime(2026, 11, 24, tzinfo=UTC)
    assert forecast(1.0, day, day + timedelta(days=1), now) == pytest.approx(4.0)
    month, end = month_start(now), next_month(now)
    assert (month, end) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    # 23.25 of 30 days gone
    assert forecast(9.3, month, end, now) == pytest.approx(9.3 * 30 / 23.25)
    early = day + timedelta(minutes=6)  # the first hour counts as an hour
    assert forecast(0.5, day, day + timedelta(days=1), early) == pytest.approx(12.0)
    assert forecast(2.0, day, day + timedelta(days=1), day + timedelta(days=2)) == 2.0
    assert next_month(datetime(2026, 12, 31, 23, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)


async def test_the_idle_cost_meter_reads_zero_for_an_idle_agent(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    idle = runtime.agents.create(AgentCreate(name="idle"))
    chatty = runtime.agents.create(AgentCreate(name="chatty"))
    home = SessionHome(
        gateway="session", session_id=UUID(ensure_chat_session(runtime.db, chatty.id))
    )
    chatty = runtime.agents.update(chatty.id, AgentUpdate(heartbeat=HeartbeatConfig(home=home)))
    scheduler = heartbeat_scheduler(runtime)
    for agent in (idle, chatty):
        scheduler.add(pulse_for(runtime, agent, scheduler))
    scripted.outcomes.clear()
    scripted.then(speak("おはよう").model_copy(update={"cost_usd": 0.02}))
    assert (await scheduler.tick_now(idle.id)).decision == "idle"
    assert (await scheduler.tick_now(chatty.id)).decision == "speak"
    scripted.outcomes.clear()
    scripted.then(reply("いいえ", cost_usd=0.5))
    assert (await runtime.chat(idle, "hi")).error is None  # a chat is not idle cost
    await runtime.router.metrics.flush()  # type: ignore[union-attr]
    overview = Budgets(runtime.db, runtime.settings).overview([idle, chatty])
    meters = {row.name: (row.heartbeat_today_usd, row.spend.today_usd) for row in overview.agents}
    assert meters["idle"] == (0.0, pytest.approx(0.5))
    assert meters["chatty"] == (pytest.approx(0.02), pytest.approx(0.02))
    assert len(scripted.requests) == 2  # the idle tick made no call


def test_the_fleet_spend_is_one_sql_sum_over_the_daily_rollup(any_db: Database) -> None:
    with any_db.write() as conn:  # the real write path: the calls and their rollup
        metrics_repo.insert(conn, usage_rows(["a1", "a2", "a3"], days=40))
    now = datetime.now(UTC)
    if now.day == 1:  # a day after the month's first, so the month holds more than the day
        now -= timedelta(days=1)
    day, month = day_start(now), month_start(now)
    by_hand = sa.text(
        "SELECT SUM(CASE WHEN day >= :day THEN cost_usd ELSE 0 END), SUM(cost_usd) "
        "FROM llm_usage_daily WHERE day >= :month"
    )
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    with any_db.read() as conn:
        today_sql, month_sql = conn.execute(
            by_hand, {"day": f"{day:%Y-%m-%d}", "month": f"{month:%Y-%m-%d}"}
        ).one()
        sa.event.listen(any_db.engine, "before_cursor_execute", seen)
        try:
            fleet = budgets_repo.spend(conn, None, day, month)
        finally:
            sa.event.remove(any_db.engine, "before_cursor_execute", seen)
    assert month_sql > today_sql > 0
    assert fleet == (float(today_sql), float(month_sql))
    assert len(statements) == 1, statements  # one aggregate, not a sum of per-agent rows
    assert "GROUP BY" not in statements[0].upper()
    budgets = Budgets(any_db, None)
    assert budgets.standing(now).fleet == fleet
    overview = budgets.overview([], now).fleet
    assert (overview.today_usd, overview.month_usd) == fleet
