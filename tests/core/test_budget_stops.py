"""Every cap, not only the daily one, stops what a spent budget should stop: the
heartbeat chooses not to act (no 'speak' followed by a budget_exceeded failure), the home
cards read "over budget"; a ticket's maxCostUsd records its 80 % and 100 % alerts once per
ticket; alerts are written to a Discord channel through the running Discord gateway
(discord.py's own send code, its HTTP stubbed: tests/fakes/discord_client.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from uuid import UUID

import pytest
from pydantic import SecretStr

from opencrab.config import Settings, load_settings
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate, HeartbeatConfig, SessionHome
from opencrab.core.budgets import Budgets, CostCap, alert_payload
from opencrab.core.heartbeat import heartbeat_scheduler, pulse_for
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.overview import agent_overview
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.gateway.configs import DiscordConfig
from opencrab.gateway.discord import DiscordGateway
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.messages import IncomingMessage, InternalSource
from opencrab.reports.budgets import alert_view
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes.discord_client import CHANNEL, FakeDiscord
from tests.fakes.scripted_provider import ScriptedProvider, reply

TOKEN = "discord-bot-token-never-shown"


def with_caps(runtime: Runtime, name: str, **caps: float) -> Agent:
    """An agent with these LLM budget caps and a home conversation (so its heartbeat
    would speak there whenever it may)."""
    agent = runtime.agents.create(AgentCreate(name=name, llm=AgentLlmConfig(**caps)))
    session = UUID(ensure_chat_session(runtime.db, agent.id))
    home = SessionHome(gateway="session", session_id=session)
    return runtime.agents.update(agent.id, AgentUpdate(heartbeat=HeartbeatConfig(home=home)))


async def spend(runtime: Runtime, scripted: ScriptedProvider, agent: Agent, usd: float) -> None:
    """One chat turn of `agent` that costs `usd`, recorded in the metrics."""
    scripted.outcomes.clear()
    scripted.then(reply("はい", cost_usd=usd))
    assert (await runtime.chat(agent, "hi")).error is None
    await runtime.router.metrics.flush()  # type: ignore[union-attr]


@pytest.mark.parametrize("cap", ["monthly", "fleet_daily", "fleet_monthly"])
async def test_a_spent_monthly_or_fleet_cap_keeps_the_heartbeat_from_acting(
    runtime: Runtime, scripted: ScriptedProvider, cap: str
) -> None:
    agent = with_caps(runtime, "hana", **({"monthly_budget_usd": 0.1} if cap == "monthly" else {}))
    other = runtime.agents.create(AgentCreate(name="other"))
    await spend(runtime, scripted, agent if cap == "monthly" else other, 0.2)
    if cap != "monthly":
        daily = cap == "fleet_daily"
        Budgets(runtime.db, runtime.settings).set_fleet_caps(
            0.1 if daily else None, None if daily else 0.1
        )
    scripted.outcomes.clear()
    scripted.then(speak("おはよう"))
    calls = len(scripted.requests)
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))

    tick = await scheduler.tick_now(agent.id)

    named = {"monthly": "monthly budget", "fleet_daily": "fleet daily cap"}
    assert (tick.decision, tick.reason) == ("idle", f"{named.get(cap, 'fleet monthly cap')} spent")
    assert tick.result is None  # no turn was started, so none failed
    assert len(scripted.requests) == calls


async def test_the_heartbeat_acts_while_no_cap_is_spent(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = with_caps(runtime, "sora", daily_budget_usd=1.0, monthly_budget_usd=1.0)
    Budgets(runtime.db, runtime.settings).set_fleet_caps(1.0, 1.0)
    await spend(runtime, scripted, agent, 0.2)
    scripted.outcomes.clear()
    scripted.then(speak("おはよう"))
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))
    tick = await scheduler.tick_now(agent.id)
    assert tick.decision == "speak"
    assert tick.result["spoke"] == "おはよう"


async def test_the_home_cards_read_over_budget_for_any_spent_cap(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    monthly = with_caps(runtime, "tsuki", monthly_budget_usd=0.1)
    free = with_caps(runtime, "kaze")
    await spend(runtime, scripted, monthly, 0.2)
    cards = {c.name: c for c in await agent_overview(runtime, None)}
    assert (cards["tsuki"].status, cards["tsuki"].budget_spent) == ("over_budget", "monthly budget")
    assert (cards["kaze"].status, cards["kaze"].budget_spent) == ("idle", None)

    Budgets(runtime.db, runtime.settings).set_fleet_caps(0.15, None)  # the fleet spent 0.2
    [card] = await agent_overview(runtime, None, agent_id=free.id)
    assert (card.status, card.over_budget, card.budget_spent) == (
        "over_budget",
        True,
        "fleet daily cap",
    )


async def test_a_tickets_cap_alerts_at_80_and_100_percent_once_per_ticket(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="worker"))
    budgets = Budgets(runtime.db, runtime.settings)
    ticket = "5b0c2d1e-0000-4000-8000-00000000000a"
    assert budgets.check(agent, CostCap(1.0, 0.5, ticket_id=ticket)) == []
    first = budgets.check(agent, CostCap(1.0, 0.85, ticket_id=ticket))
    assert [(a.scope, a.cap, a.threshold) for a in first] == [(f"ticket:{ticket}", "ticket", 80)]
    assert budgets.check(agent, CostCap(1.0, 0.9, ticket_id=ticket)) == []  # once
    with pytest.raises(Exception, match="maxCostUsd"):
        budgets.check(agent, CostCap(1.0, 1.2, ticket_id=ticket))
    with pytest.raises(Exception, match="maxCostUsd"):  # a new stretch: no second alert
        budgets.check(agent, CostCap(1.0, 1.0, ticket_id=ticket))
    rows = budgets.alerts()
    assert sorted((a.scope, a.threshold, a.spent_usd) for a in rows) == [
        (f"ticket:{ticket}", 80, 0.85),
        (f"ticket:{ticket}", 100, 1.2),
    ]
    view = alert_view(rows[0], {})
    assert (view.scope, view.ticket_id, view.agent_id, view.cap) == (
        "ticket",
        ticket,
        None,
        "ticket",
    )
    payload = alert_payload(rows[0], {})
    assert (payload["scope"], payload["ticketId"], payload["agentId"]) == ("ticket", ticket, None)

    # through a turn: the engine's check before each call records them for its ticket
    scripted.outcomes.clear()
    scripted.then(reply("done", cost_usd=0.5))
    other = "5b0c2d1e-0000-4000-8000-00000000000b"
    message = IncomingMessage.text("go", source=InternalSource(origin="ticket"))
    result = await runtime.turns.run(
        agent,
        message,
        session_id="00000000-0000-4000-8000-0000000000b1",
        cost_cap=CostCap(0.5, 0.45, ticket_id=other),
    )
    assert result.error is None  # 90 % before the call: allowed, alerted
    assert [(a.scope, a.threshold) for a in budgets.alerts() if a.scope.endswith("b")] == [
        (f"ticket:{other}", 80)
    ]


@pytest.fixture
async def discord_runtime(
    data_dir: object, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Runtime, FakeDiscord]]:
    """A runtime with `[budgets] discord_channel_id` set and a Discord gateway running in
    it (its client: real discord.py, HTTP stubbed)."""
    monkeypatch.setenv("OPENCRAB_BUDGETS__DISCORD_CHANNEL_ID", str(CHANNEL))
    settings: Settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    recorder = MetricsRecorder(db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(scripted)
    fake = FakeDiscord()
    config = DiscordConfig(enabled=True, token=SecretStr(TOKEN), guild_ids=[111])
    gateway = DiscordGateway(config, client=fake.client)
    await gateway.on_message(fake.message("こんにちは", channel=CHANNEL))  # the channel seen
    async with Runtime.open(settings, db=db, router=router) as rt:
        rt.outlets["discord"] = gateway
        yield rt, fake
    await recorder.aclose()
    db.close()


async def test_alerts_are_written_to_the_discord_channel_through_the_gateway(
    discord_runtime: tuple[Runtime, FakeDiscord],
    scripted: ScriptedProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime, fake = discord_runtime
    agent = runtime.agents.create(AgentCreate(name="ゆい", llm=AgentLlmConfig(daily_budget_usd=0)))
    caplog.set_level(logging.DEBUG)
    result = await runtime.chat(agent, "hi")  # 0 of $0: both thresholds, refused
    assert result.error is not None
    assert result.error.error == "budget_exceeded"
    for _ in range(200):
        if len(fake.sent) >= 2:
            break
        await asyncio.sleep(0.02)
    texts = sorted(p["content"] for channel, p in fake.sent if channel == CHANNEL)
    assert len(fake.sent) == 2
    assert texts[0].startswith("Budget alert: agent ゆい reached 100% of its daily budget")
    assert texts[1].startswith("Budget alert: agent ゆい reached 80% of its daily budget")
    assert all(p["allowed_mentions"] == {"parse": []} for _, p in fake.sent)
    assert TOKEN not in repr(fake.sent)
    assert TOKEN not in caplog.text

    assert (await runtime.chat(agent, "again")).error is not None  # recorded once: no more
    await asyncio.sleep(0)
    assert len(fake.sent) == 2


async def test_a_failing_discord_delivery_never_blocks_and_logs_no_text(
    discord_runtime: tuple[Runtime, FakeDiscord],
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime, fake = discord_runtime

    async def refused(channel_id: int, *, params: object) -> None:
        raise RuntimeError(f"Discord said no to {TOKEN}")

    fake.client.http.send_message = refused  # type: ignore[method-assign,assignment]
    agent = runtime.agents.create(AgentCreate(name="ren", llm=AgentLlmConfig(daily_budget_usd=0)))
    result = await runtime.chat(agent, "hi")
    assert result.error is not None
    for _ in range(200):
        if "budget alert to discord failed" in caplog.text:
            break
        await asyncio.sleep(0.02)
    assert "budget alert to discord failed: RuntimeError" in caplog.text
    assert TOKEN not in caplog.text
    assert "Budget alert:" not in caplog.text
