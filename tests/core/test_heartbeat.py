"""Heartbeat: cheap checks first, speak/learn/idle, an absolute schedule, logged ticks."""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
from datetime import UTC, datetime
from itertools import pairwise
from uuid import UUID, uuid4

import pytest
import sqlalchemy as sa
from pydantic import SecretStr

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings
from opencrab.core.agent import (
    AgentCreate,
    AgentStore,
    AgentUpdate,
    ChannelHome,
    HeartbeatConfig,
)
from opencrab.core.discussion import Discussion
from opencrab.core.heartbeat import (
    REFLECT_EVERY_SECS,
    AgentPulse,
    HeartbeatScheduler,
    Observer,
    decide,
    first_tick_in,
    heartbeat_act,
    heartbeat_scheduler,
    prime_warning,
    pulse_for,
    start_heartbeats,
)
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.core.tools import tool_id
from opencrab.gateway.configs import DiscordConfig
from opencrab.gateway.discord import DiscordGateway
from opencrab.llm.metrics import CallRecord, MetricsRecorder
from opencrab.messages import session_for
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore, heartbeat_key
from opencrab.store.tables import agents, heartbeat_log
from tests.core.conftest import calls, homed, speak
from tests.fakes.discord_client import CHANNEL, GUILD, FakeDiscord
from tests.fakes.scripted_provider import ScriptedProvider


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stored_agents(db: Database, count: int) -> list[str]:
    """`count` bare agents stored straight in the table; their ids."""
    now = datetime.now(UTC)
    ids = [str(uuid4()) for _ in range(count)]
    with db.write() as conn:
        conn.execute(
            agents.insert(),
            [
                {"id": i, "name": f"a{n}", "prompt": "", "created_at": now, "updated_at": now}
                for n, i in enumerate(ids)
            ],
        )
    return ids


def logged(db: Database) -> list[tuple[str, str]]:
    with db.read() as conn:
        rows = conn.execute(
            sa.select(heartbeat_log.c.agent_id, heartbeat_log.c.decision).order_by(
                heartbeat_log.c.id
            )
        ).all()
    return [(str(r.agent_id), r.decision) for r in rows]


async def test_idle_agent_ticks_without_a_model_call(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="idle"))
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))
    tick = await scheduler.tick_now(agent.id)
    assert tick.decision == "idle"
    assert scripted.requests == []
    assert logged(runtime.db) == [(agent.id, "idle")]


async def test_disabled_heartbeat_is_skipped(runtime: Runtime) -> None:
    agent = runtime.agents.create(
        AgentCreate(name="off", heartbeat=HeartbeatConfig(interval_secs=31, enabled=False))
    )
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))
    assert (await scheduler.tick_now(agent.id)).decision == "skip"


async def test_spent_budget_keeps_the_agent_idle(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="spent"))
    ann = runtime.agents.create(AgentCreate(name="ann"))
    agent = runtime.agents.update(agent.id, AgentUpdate(llm=AgentLlmConfig(daily_budget_usd=1.0)))
    discussion = Discussion.create(runtime.db, theme="t", participants=[ann.id, agent.id])
    scripted.outcomes.clear()
    scripted.then(speak("hello"))
    await discussion.take_turn(runtime, ann)
    MetricsRecorder(runtime.db).write(  # the metrics writer: the calls and their rollup
        [
            CallRecord(
                id=str(uuid4()),
                agent_id=agent.id,
                timestamp=datetime.now(UTC),
                provider="openai",
                model="gpt-5.2",
                purpose="tool_calling",
                input_tokens=1,
                output_tokens=1,
                total_tokens=2,
                estimated_cost_usd=1.5,
                latency_ms=10,
            )
        ]
    )
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))
    requests_before = len(scripted.requests)
    tick = await scheduler.tick_now(agent.id)
    assert (tick.decision, tick.reason) == ("idle", "daily budget spent")
    assert len(scripted.requests) == requests_before


async def test_speak_when_the_discussion_moved_on(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    ann = runtime.agents.create(AgentCreate(name="ann"))
    ben = runtime.agents.create(AgentCreate(name="ben"))
    discussion = Discussion.create(runtime.db, theme="猫と犬", participants=[ann.id, ben.id])
    scripted.outcomes.clear()
    scripted.then(speak("猫派です"), '{"skill_name": null}', speak("犬派です"))
    await discussion.take_turn(runtime, ann)
    scheduler = heartbeat_scheduler(runtime)
    for agent in (ann, ben):
        scheduler.add(pulse_for(runtime, agent, scheduler))

    ann_tick = await scheduler.tick_now(ann.id)  # ann spoke last: no consecutive speech
    ben_tick = await scheduler.tick_now(ben.id)

    assert ann_tick.decision == "learn"  # she reflects on her speech instead
    assert ann_tick.result["data"] == {"learned": False, "reason": "nothing new to learn"}
    assert (ben_tick.decision, ben_tick.session_id) == ("speak", discussion.id)
    assert ben_tick.result["spoke"] == "犬派です"
    assert [s.text for s in discussion.speeches()] == ["猫派です", "犬派です"]
    assert logged(runtime.db)[-2:] == [(ann.id, "learn"), (ben.id, "speak")]


async def test_a_discussion_waiting_for_a_decision_is_left_alone_until_it_goes_on(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    ann = runtime.agents.create(AgentCreate(name="ann", tool_ids=[tool_id("write_file")]))
    save_tool_settings(runtime.db, ann.id, ToolSettings(approvals={"write_file": "always"}))
    ben = runtime.agents.create(AgentCreate(name="ben"))
    discussion = Discussion.create(runtime.db, theme="files", participants=[ann.id, ben.id])
    scripted.outcomes.clear()
    write = calls(("write_file", {"path": "notes.txt", "content": "cats"}))
    scripted.then(write, speak("I wrote notes.txt."), speak("Thanks."))
    held = await discussion.take_turn(runtime, ann)
    assert (held.action, held.spoke) == ("approval", None)
    assert held.approval_id is not None

    async def ben_ticks() -> str:
        scheduler = heartbeat_scheduler(runtime)  # a new observer: the facts as they are now
        scheduler.add(pulse_for(runtime, ben, scheduler))
        return (await scheduler.tick_now(ben.id)).decision

    assert await ben_ticks() == "idle"  # the call waits: nobody speaks meanwhile
    await runtime.approvals.decide(held.approval_id, approve=True)
    assert await ben_ticks() == "idle"  # decided, but ann has not finished her turn yet
    runtime.approvals.follow_ups.start()
    async with asyncio.timeout(60):
        while discussion.waiting():
            await asyncio.sleep(0.05)
    assert await ben_ticks() == "speak"
    assert [(s.speaker, s.text) for s in discussion.speeches()] == [
        ("ann", "I wrote notes.txt."),
        ("ben", "Thanks."),
    ]


async def test_learn_reflects_once_there_is_new_experience(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="thinker"))
    scripted.outcomes.clear()
    scripted.then(
        speak("覚えておきます"),
        '{"skill_name": "要点を繰り返す", "description": "確認する", '
        '"situation_pattern": "依頼", "guidance": "要点を復唱する"}',
    )
    await runtime.chat(agent, "メモして")
    scheduler = heartbeat_scheduler(runtime)
    pulse = pulse_for(runtime, agent, scheduler)
    scheduler.add(pulse)
    tick = await scheduler.tick_now(agent.id)
    assert tick.decision == "learn"
    assert tick.result["success"] is True
    assert "要点を繰り返す" in {s.name for s in runtime.engine.skills_for(agent).list()}
    # right after a reflection: idle, and a fresh pulse resumes from heartbeat_log
    assert (await scheduler.tick_now(agent.id)).decision == "idle"
    again = HeartbeatScheduler(runtime.db, act=lambda tick: heartbeat_act(runtime, tick))
    again.add(pulse_for(runtime, agent, again))
    assert (await again.tick_now(agent.id)).decision == "idle"


def test_decide_needs_new_logs_and_time_to_learn(db: Database) -> None:
    observer = Observer(db)
    observer.latest_log = {"a": 5}
    pulse = AgentPulse("a", 29.0, last_reflection=0.0, logs_seen=5)
    assert decide(pulse, observer, REFLECT_EVERY_SECS * 2).decision == "idle"  # nothing new
    pulse.logs_seen = 4
    assert decide(pulse, observer, REFLECT_EVERY_SECS / 2).decision == "idle"  # too soon
    assert decide(pulse, observer, REFLECT_EVERY_SECS * 2).decision == "learn"


def test_schedule_is_absolute_and_late_ticks_are_skipped(db: Database) -> None:
    clock = Clock()
    scheduler = HeartbeatScheduler(db, clock=clock)
    scheduler.add(AgentPulse("a", 29.0), first_in=0.0)
    due, entry, _ = heapq.heappop(scheduler._heap)
    clock.now = due + 3.0  # three seconds late
    scheduler._due(due, entry, "a")
    assert scheduler._heap[0][0] == due + 29.0  # not now + 29: no drift
    clock.now = due + 29.0 + 100.0  # more than three intervals late
    heapq.heappop(scheduler._heap)
    scheduler._due(due + 29.0, entry, "a")
    assert scheduler.late_skips == 3
    assert scheduler._heap[0][0] == due + 29.0 * 5
    assert scheduler.ticks == 2
    # each logged tick says how late it ran, so its slot is known however loaded the machine
    assert [row["result_json"].get("late_ms") for row in scheduler._pending] == [3000, 100000]


def test_an_agent_added_again_ticks_once_per_interval(db: Database) -> None:
    clock = Clock()
    scheduler = HeartbeatScheduler(db, clock=clock)
    scheduler.add(AgentPulse("a", 29.0), first_in=0.0)
    scheduler.remove("a")
    scheduler.add(AgentPulse("a", 31.0), first_in=0.0)  # e.g. its interval changed
    scheduler.add(AgentPulse("b", 29.0), first_in=0.0)
    scheduler.remove("b")  # deleted: its queued tick must not run
    assert scheduler.tick_due() == 31.0
    assert scheduler.ticks == 1
    clock.now += 31.0
    assert scheduler.tick_due() == 31.0
    assert scheduler.ticks == 2
    assert [row["agent_id"] for row in scheduler._pending] == ["a", "a"]  # never "b"


def test_next_ticks_count_down_and_follow_the_schedule(db: Database) -> None:
    clock = Clock()
    scheduler = HeartbeatScheduler(db, clock=clock)
    scheduler.add(AgentPulse("a", 29.0), first_in=10.0)
    scheduler.add(AgentPulse("b", 31.0), first_in=5.0)
    scheduler.add(AgentPulse("gone", 29.0), first_in=1.0)
    scheduler.remove("gone")
    assert scheduler.next_ticks() == {"a": 10.0, "b": 5.0}
    clock.now += 5.0
    scheduler.tick_due()  # b ticks; its next tick is one interval on
    assert scheduler.next_ticks() == {"a": 5.0, "b": 31.0}
    scheduler.remove("a")
    scheduler.add(AgentPulse("a", 37.0), first_in=2.0)  # re-added: only its new entry
    assert scheduler.next_ticks() == {"a": 2.0, "b": 31.0}


async def test_a_thousand_idle_agents_tick_on_one_loop(db: Database) -> None:
    ids = stored_agents(db, 1000)
    acted: list[object] = []

    async def act(tick: object) -> None:
        acted.append(tick)

    scheduler = HeartbeatScheduler(db, act=act)
    for n, agent_id in enumerate(ids):
        scheduler.add(AgentPulse(agent_id, 0.05 + (n % 7) * 0.01), first_in=(n % 50) * 0.001)
    stop = asyncio.Event()
    runner = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(0.3)
    stop.set()
    await runner
    assert scheduler.ticks >= 1000
    assert acted == []  # idle agents: the act (an LLM turn) never runs
    assert logged(db).count((ids[0], "idle")) >= 1
    assert len(logged(db)) == scheduler.ticks  # every tick logged


async def test_shutdown_keeps_the_ticks_of_living_agents_when_one_was_deleted_meanwhile(
    any_db: Database, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    store = AgentStore(any_db, settings)
    kept = store.create(AgentCreate(name="kept", prompt="")).id
    gone = store.create(AgentCreate(name="gone", prompt="")).id
    clock = Clock()
    scheduler = HeartbeatScheduler(any_db, clock=clock)
    scheduler.add(AgentPulse(kept, 29.0), first_in=0.0)
    scheduler.add(AgentPulse(gone, 29.0), first_in=0.0)
    scheduler.tick_due()
    assert len(scheduler._pending) == 2  # buffered, not yet written
    store.delete("gone")  # e.g. through the API, while its tick waits for the flush
    stop = asyncio.Event()
    stop.set()
    with caplog.at_level(logging.INFO, logger="opencrab.core.heartbeat"):
        await scheduler.run(stop)  # shutting down: the pending rows are flushed
    assert logged(any_db) == [(kept, "idle")]
    said = [r.getMessage() for r in caplog.records if "deleted since they ticked" in r.message]
    assert said == [
        f"dropped 1 heartbeat log row(s) of 1 agent(s) deleted since they ticked: {gone}"
    ]
    assert scheduler._pending == []


# ------------------------------------------------------------------ spread, primes, home
def test_first_ticks_are_spread_over_each_agents_interval(db: Database) -> None:
    clock = Clock()
    wall = Clock()
    wall.now = 1_800_000_000.0
    scheduler = HeartbeatScheduler(db, clock=clock, wall=wall)
    ids = [str(UUID(int=n)) for n in range(1, 41)]  # fixed ids: the same phases every run
    for agent_id in ids:
        scheduler.add(AgentPulse(agent_id, 29.0))
    scheduler.add(AgentPulse("slow", 97.0))

    due = {agent_id: when for when, _, agent_id in scheduler._heap}
    offsets = [due[a] - clock.now for a in ids]
    assert all(0.0 < o <= 29.0 for o in offsets)
    assert len(set(offsets)) == len(ids)  # no two agents in the same phase
    assert min(offsets) < 29.0 / 4  # spread over the whole interval
    assert max(offsets) > 29.0 * 3 / 4
    assert offsets == pytest.approx([first_tick_in(a, 29.0, wall.now) for a in ids])
    assert 0.0 < due["slow"] - clock.now <= 97.0


def test_every_process_puts_an_agent_on_the_same_slots(db: Database) -> None:
    """Slots are counted from the epoch, not from when a process started: a process that
    takes an agent over ticks it on the slots its previous holder used."""
    firsts = []
    for started, monotonic in ((1_800_000_000.0, 1000.0), (1_800_000_123.4, 5.0)):
        clock, wall = Clock(), Clock()
        clock.now, wall.now = monotonic, started
        scheduler = HeartbeatScheduler(db, clock=clock, wall=wall)
        scheduler.add(AgentPulse("a", 29.0))
        ((due, _, _),) = scheduler._heap
        firsts.append(wall.now + (due - clock.now))  # the first slot, on the wall clock
    apart = (firsts[1] - firsts[0]) / 29.0
    assert apart == pytest.approx(round(apart), abs=1e-6)
    assert round(apart) in (4, 5)  # started 123.4 s later: four or five intervals on
    assert first_tick_in("a", 29.0, firsts[0] + 0.5) == pytest.approx(28.5)  # just past one


def test_a_non_prime_interval_is_warned_about_with_the_nearest_primes() -> None:
    assert prime_warning(29) is None
    assert prime_warning(2) is None
    assert prime_warning(30) == (
        "heartbeat interval 30 s is not a prime; nearest primes: 29, 31 "
        "(prime intervals keep agents from ticking in step)"
    )
    assert "nearest primes: 23, 29 " in str(prime_warning(28))
    assert "nearest primes: 2 " in str(prime_warning(1))


async def test_the_server_warns_about_a_non_prime_interval(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    runtime.agents.create(AgentCreate(name="even", heartbeat=HeartbeatConfig(interval_secs=30)))
    runtime.agents.create(AgentCreate(name="prime", heartbeat=HeartbeatConfig(interval_secs=31)))
    with caplog.at_level("WARNING", logger="opencrab.core.runtime"):
        service = await start_heartbeats(runtime)
        await service.stop()
    warned = [r.getMessage() for r in caplog.records if "not a prime" in r.getMessage()]
    assert warned == [
        "agent even: heartbeat interval 30 s is not a prime; nearest primes: 29, 31 "
        "(prime intervals keep agents from ticking in step)"
    ]


async def test_an_agent_speaks_in_its_home_session_on_its_heartbeat(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent, session_id, scheduler = homed(runtime, "homey")
    scripted.outcomes.clear()
    scripted.then(speak("おはようございます。今日の予定を整理しましょうか？"))

    tick = await scheduler.tick_now(agent.id)

    assert (tick.decision, tick.session_id, tick.checks["home"]) == ("speak", session_id, True)
    assert tick.result["spoke"] == "おはようございます。今日の予定を整理しましょうか？"
    assert tick.result["delivered"] is True
    said = session_messages(runtime.db, session_id)
    assert [(m.role, m.speaker_name, m.content) for m in said] == [
        ("assistant", "homey", "おはようございます。今日の予定を整理しましょうか？")
    ]
    # not again within every_secs, also after a restart (the timer resumes from the log);
    # the next tick may reflect on the speech instead once the observer's facts refresh
    # (at most once a second: a slow first tick under load sees them), never speak
    assert (await scheduler.tick_now(agent.id)).decision != "speak"
    assert len(session_messages(runtime.db, session_id)) == 1
    again = heartbeat_scheduler(runtime)
    again.add(pulse_for(runtime, agent, again))
    assert (await again.tick_now(agent.id)).decision != "speak"  # (it reflects instead)
    assert len(session_messages(runtime.db, session_id)) == 1


async def test_a_discord_home_gets_the_heartbeat_speech_through_the_gateway(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="bot"))
    home = ChannelHome(
        gateway="discord", channel_id=str(CHANNEL), conversation=f"{GUILD}/{CHANNEL}"
    )
    agent = runtime.agents.update(agent.id, AgentUpdate(heartbeat=HeartbeatConfig(home=home)))
    fake = FakeDiscord()
    gateway = DiscordGateway(
        DiscordConfig(enabled=True, token=SecretStr("t"), guild_ids=[GUILD]), client=fake.client
    )
    await gateway.on_message(fake.message("おはよう"))  # the channel the bot lives in
    scripted.outcomes.clear()
    scripted.then(speak("今日も水やりを忘れずに。"))
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))

    alone = await scheduler.tick_now(agent.id)  # no Discord gateway runs here: kept only
    assert (alone.result["spoke"], alone.result["delivered"]) == ("今日も水やりを忘れずに。", False)
    assert fake.sent == []

    runtime.outlets["discord"] = gateway
    scheduler.pulses[agent.id].last_home = float("-inf")
    tick = await scheduler.tick_now(agent.id)

    assert tick.result["delivered"] is True
    assert [(channel, p["content"]) for channel, p in fake.sent] == [
        (CHANNEL, "今日も水やりを忘れずに。")
    ]
    stored = session_messages(runtime.db, home.session_for(agent.id))
    assert [m.content for m in stored] == ["今日も水やりを忘れずに。"] * 2


def test_a_home_stored_with_a_guild_reads_as_that_channels_conversation(
    any_db: Database, settings: Settings
) -> None:
    """Homes stored before they were (gateway, channel) pairs keep working: the Discord
    form `{gateway, guild_id, channel_id}` is the channel's conversation, same session."""
    store = AgentStore(any_db, settings)
    agent = store.create(AgentCreate(name="old"))
    stored = {
        "interval_secs": 29,
        "enabled": True,
        "home": {"every_secs": 600, "gateway": "discord", "guild_id": "7", "channel_id": "9"},
    }
    with any_db.write() as conn:
        conn.execute(
            sa.text("UPDATE agents SET heartbeat_json = :beat WHERE id = :id"),
            {"beat": json.dumps(stored), "id": agent.id},
        )
    home = store.get(agent.id).heartbeat.home
    assert isinstance(home, ChannelHome)
    assert (home.gateway, home.channel_id, home.conversation, home.every_secs) == (
        "discord",
        "9",
        "7/9",
        600,
    )
    assert home.session_for(agent.id) == session_for("discord", "7/9", agent.id)
    assert home.outlet().target().channel_id == "9"


# ------------------------------------------------------------------ shared by lease
async def test_two_schedulers_share_the_agents_and_a_handover_never_ticks_a_slot_twice(
    any_db: Database,
) -> None:
    """Two processes' schedulers on one database: the second one joining takes over half
    the agents, the first closing hands its half back; every slot of every agent is
    ticked at most once, whichever scheduler held the agent."""
    ids = stored_agents(any_db, 12)
    interval = 0.3
    store = LeaseStore(any_db)

    def scheduler(owner: str) -> HeartbeatScheduler:
        keeper = LeaseKeeper(store, owner=owner, ttl_secs=0.6)  # a pass every 0.2 s
        made = HeartbeatScheduler(any_db, leases=keeper)
        for agent_id in ids:
            made.add(AgentPulse(agent_id, interval))
        keeper.start()
        return made

    async def run_for(schedulers: list[HeartbeatScheduler], secs: float) -> None:
        stop = asyncio.Event()
        runners = [asyncio.create_task(s.run(stop)) for s in schedulers]
        await asyncio.sleep(secs)
        stop.set()
        await asyncio.gather(*runners)

    first = scheduler("first")
    await run_for([first], 1.0)
    second = scheduler("second")
    await run_for([first, second], 2.0)  # the second joins: the agents are split
    assert first.leases is not None
    assert second.leases is not None
    shares = [sum(s.leases.holds(heartbeat_key(a)) for a in ids) for s in (first, second)]
    assert shares == [6, 6]
    await first.leases.close()  # a clean shutdown: the second takes all of them over
    await run_for([second], 1.5)
    assert sum(second.leases.holds(heartbeat_key(a)) for a in ids) == 12
    await second.leases.close()

    with any_db.read() as conn:
        rows = conn.execute(
            sa.select(
                heartbeat_log.c.agent_id, heartbeat_log.c.result_json, heartbeat_log.c.created_at
            )
        ).all()
    slots: dict[str, list[tuple[float, str]]] = {}
    for r in rows:
        late = r.result_json.get("late_ms", 0) / 1000
        at = r.created_at.replace(tzinfo=UTC) if r.created_at.tzinfo is None else r.created_at
        slots.setdefault(str(r.agent_id), []).append(
            (at.timestamp() - late, r.result_json["process"])
        )
    assert set(slots) == set(ids)
    moved = 0
    for agent_id, ticked in slots.items():
        ticked.sort()
        owners = [owner for _, owner in ticked]
        moved += len(set(owners)) > 1
        for (t1, _), (t2, _) in pairwise(ticked):
            # one tick per slot, on the slots every process shares (whole intervals apart)
            assert t2 - t1 > interval * 0.9, (agent_id, ticked)
    assert moved == 12  # each agent ticked first in the first, then in the second


async def test_a_slot_due_before_the_lease_was_taken_is_left_to_the_previous_holder(
    db: Database,
) -> None:
    """The previous holder ticked that slot (or let go of the agent first, and then nobody
    may): a slot due before the taking, or within the slack after it, is not ticked, even
    when this scheduler comes to it late."""
    clock = Clock()
    keeper = LeaseKeeper(LeaseStore(db), owner="heir", ttl_secs=60, clock=clock)
    scheduler = HeartbeatScheduler(db, clock=clock, leases=keeper)
    scheduler.add(AgentPulse("a", 10.0), first_in=0.05)  # due within the slack of the taking
    scheduler.add(AgentPulse("b", 10.0), first_in=1.0)
    await keeper.run_pass()  # taken at 1000.0
    clock.now += 0.05
    scheduler.tick_due()
    assert (scheduler.ticks, scheduler.elsewhere) == (0, 1)  # "a" at 1000.05: not its slot
    clock.now += 2.0  # "b" was due at 1001.0, after the taking: ticked, if late
    scheduler.tick_due()
    assert (scheduler.ticks, scheduler.elsewhere) == (1, 1)
    clock.now = 1010.05  # "a"'s next slot: held for 10 s by now
    scheduler.tick_due()
    assert (scheduler.ticks, scheduler.elsewhere) == (2, 1)
    await keeper.close()
