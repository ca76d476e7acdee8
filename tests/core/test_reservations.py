"""Budget reservations (core/reservations.py) hold caps under concurrency: twenty turns
at once against a daily cap worth three calls make at most three calls, on SQLite and
PostgreSQL, for an agent's cap and the fleet's, in one process and in two (two runtimes
on their own engines and event loops, in two threads, on one PostgreSQL); a crashed
process's reservation holds until it lapses; a model with no price is refused under a
money cap, never free.

The model's calls are held at a gate (tests/fakes/gated_provider.py) until every turn
has either reached it or been refused, which is the moment a checked-only budget lets
them all through. The turns' model (openai/gpt-5.2, the packaged tool_calling model) is
priced here at $0 per input token and $1,000 per 1M output tokens, so a call without
max_tokens is estimated at 1,024 output tokens: $1.024, whatever its prompt; a cap of
$3.50 holds three such calls and not four. Each call then costs what its 5 output
tokens do ($0.005)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest

from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.budgets import Budgets
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.pricing import ModelPrice, save_price
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from opencrab.store.repositories import reservations
from tests.fakes.gated_provider import GatedProvider, at_once, settled

CAP = 3.5  # three estimates of $1.024 fit, four do not
ESTIMATE = 1.024
COST = 0.005  # 5 output tokens (the scripted usage) at $1,000 per 1M


def price_the_model(db: Database) -> None:
    with db.write() as conn:
        save_price(conn, ModelPrice("openai", "gpt-5.2", 0.0, 1000.0))


@asynccontextmanager
async def opened(settings: Settings, url: str) -> AsyncIterator[tuple[Runtime, GatedProvider]]:
    """A runtime on its own Database at `url` (migrated already: Alembic's context is
    one per process, not per thread) whose model calls wait at a gate."""
    db = Database(url)
    provider = GatedProvider("openai", "ok")
    recorder = MetricsRecorder(db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(provider)
    try:
        async with Runtime.open(settings, db=db, router=router) as runtime:
            yield runtime, provider
        await recorder.aclose()
    finally:
        db.close()


@pytest.fixture
async def capped(
    settings: Settings, any_db: Database
) -> AsyncIterator[tuple[Runtime, GatedProvider]]:
    price_the_model(any_db)
    async with opened(settings, any_db.url.render_as_string(hide_password=False)) as pair:
        yield pair


def refused(results: list[TurnResult]) -> list[str]:
    return [r.error.message for r in results if r.error and r.error.error == "budget_exceeded"]


async def test_twenty_turns_at_once_make_at_most_the_three_calls_an_agents_cap_holds(
    capped: tuple[Runtime, GatedProvider],
) -> None:
    runtime, provider = capped
    agent = runtime.agents.create(
        AgentCreate(name="saki", llm=AgentLlmConfig(daily_budget_usd=CAP))
    )
    held, results = await at_once(provider, [runtime.chat(agent, f"hi {i}") for i in range(20)])
    assert held <= 3
    assert len(refused(results)) == 20 - held
    assert all("held by calls running now" in m for m in refused(results))
    await runtime.router.metrics.flush()  # type: ignore[union-attr]
    with runtime.db.read() as conn:  # every call settled: its cost in, its reservation out
        assert reservations.live(conn, datetime.now(UTC)) == []
    today, _ = Budgets(runtime.db, runtime.settings).standing().spent(agent.id)
    assert today == pytest.approx(held * COST)


async def test_twenty_turns_of_four_agents_make_at_most_three_calls_under_the_fleet_cap(
    capped: tuple[Runtime, GatedProvider],
) -> None:
    runtime, provider = capped
    Budgets(runtime.db, runtime.settings).set_fleet_caps(CAP, None)
    agents = [runtime.agents.create(AgentCreate(name=f"a{i}")) for i in range(4)]
    turns = [runtime.chat(agents[i % 4], f"hi {i}") for i in range(20)]
    held, results = await at_once(provider, turns)
    assert held <= 3
    assert len(refused(results)) == 20 - held
    assert all(m.startswith("the fleet's $3.50 daily budget") for m in refused(results))


def _side(
    settings: Settings,
    url: str,
    agent_id: str,
    turns: int,
    out: dict[str, object],
    decided: threading.Event,
    go: threading.Event,
) -> None:
    """One "process": its own Database, router, runtime and event loop, running `turns`
    turns of the agent at once; tells `decided` with its held calls, waits for `go`."""

    async def run() -> None:
        async with opened(settings, url) as (runtime, provider):
            agent = runtime.agents.get(agent_id)
            tasks = [asyncio.ensure_future(runtime.chat(agent, f"hi {i}")) for i in range(turns)]
            out["held"] = await settled(provider, tasks)
            decided.set()
            await asyncio.to_thread(go.wait, 120)
            provider.open()
            out["results"] = list(await asyncio.gather(*tasks))

    try:
        asyncio.run(run())
    except BaseException as exc:  # shown by the test
        out["error"] = exc
        decided.set()


def test_twenty_turns_on_two_processes_on_postgresql_make_at_most_three_calls(
    settings: Settings, pg_url: str
) -> None:
    db = Database(pg_url)
    db.upgrade()
    price_the_model(db)
    agent = AgentStore(db, settings).create(
        AgentCreate(name="saki", llm=AgentLlmConfig(daily_budget_usd=CAP))
    )
    db.close()
    go = threading.Event()
    sides: list[tuple[dict[str, object], threading.Event, threading.Thread]] = []
    for _ in range(2):
        out: dict[str, object] = {}
        decided = threading.Event()
        thread = threading.Thread(
            target=_side, args=(settings, pg_url, agent.id, 10, out, decided, go)
        )
        sides.append((out, decided, thread))
    for _, _, thread in sides:
        thread.start()
    try:
        for out, decided, _ in sides:
            assert decided.wait(180), "a side never decided"
            assert "error" not in out, out.get("error")
    finally:
        go.set()
        for _, _, thread in sides:
            thread.join(180)
    for out, _, _ in sides:
        assert "error" not in out, out.get("error")
    held = sum(int(out["held"]) for out, _, _ in sides)  # type: ignore[call-overload]
    results = [r for out, _, _ in sides for r in out["results"]]  # type: ignore[attr-defined]
    assert held <= 3
    assert len(refused(results)) == 20 - held


CRASHING = """
import asyncio, os, signal, sys, uuid
from opencrab.config import load_settings
from opencrab.core.reservations import BudgetGuard
from opencrab.llm.pricing import PriceBook
from opencrab.llm.router import CallInfo, Target
from opencrab.llm.types import ChatRequest, Message
from opencrab.store import Database

async def main():
    db = Database(sys.argv[1])
    with db.read() as conn:
        book = PriceBook.load(conn)
    guard = BudgetGuard(db, load_settings(), lambda: book, owner="crashed:1:x")
    request = ChatRequest(model="gpt-5.2", messages=[Message.user("hi")], max_tokens=3000)
    info = CallInfo(agent_id=sys.argv[2])
    assert await guard.reserve(Target("openai", "gpt-5.2"), request, info, str(uuid.uuid4()))
    print("reserved", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # dies mid-call: nothing settles it

asyncio.run(main())
"""


async def test_a_crashed_processs_reservation_holds_until_it_lapses(
    monkeypatch: pytest.MonkeyPatch, any_db: Database
) -> None:
    monkeypatch.setenv("OPENCRAB_BUDGETS__RESERVATION_TTL_SECS", "2")
    settings = load_settings()
    price_the_model(any_db)
    url = any_db.url.render_as_string(hide_password=False)
    async with opened(settings, url) as (runtime, provider):
        provider.open()
        agent = runtime.agents.create(
            AgentCreate(name="saki", llm=AgentLlmConfig(daily_budget_usd=CAP))
        )
        crashed = subprocess.run(
            [sys.executable, "-c", CRASHING, url, agent.id],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ,
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert crashed.stdout.strip() == "reserved"
        with runtime.db.read() as conn:  # $3.00 + ~$0.00 input of the dead process's call
            [dead] = reservations.live(conn, datetime.now(UTC))
        assert (dead.owner, dead.cost_usd) == ("crashed:1:x", pytest.approx(3.0, abs=0.01))

        first = await runtime.chat(agent, "hi")  # $3.00 held + $1.024 > $3.50
        assert first.error is not None
        assert "held by calls running now" in first.error.message
        assert provider.calls_started == 0

        await _until_lapsed(runtime.db)
        second = await runtime.chat(agent, "hi")
        assert second.error is None, second.error
        assert provider.calls_started == 1


async def _until_lapsed(db: Database) -> None:
    for _ in range(600):
        with db.read() as conn:
            if not reservations.live(conn, datetime.now(UTC)):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the crashed process's reservation never lapsed")


async def test_a_model_without_a_price_is_refused_under_a_money_cap(
    capped: tuple[Runtime, GatedProvider],
) -> None:
    runtime, provider = capped
    provider.open()
    agent = runtime.agents.create(
        AgentCreate(
            name="kaze",
            llm=AgentLlmConfig(
                default_provider="openai", default_model="gpt-4o-mini", daily_budget_usd=CAP
            ),
        )
    )
    result = await runtime.chat(agent, "hi")
    assert result.error is not None
    assert result.error.error == "budget_exceeded"
    assert result.error.message.startswith("openai/gpt-4o-mini has no price, so under agent kaze")
    assert "opencrab llm price openai gpt-4o-mini" in result.error.message
    assert provider.calls_started == 0

    free = runtime.agents.create(  # without a cap, nothing is refused
        AgentCreate(name="sora", llm=AgentLlmConfig(default_model="gpt-4o-mini"))
    )
    assert (await runtime.chat(free, "hi")).error is None
    assert provider.calls_started == 1
