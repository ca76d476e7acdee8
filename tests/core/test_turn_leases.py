"""Turns and heartbeats hold leases, so another process sharing the database never runs
a turn of the same session, nor ticks the same agent, at the same time."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from opencrab.core.agent import AgentCreate, HeartbeatConfig
from opencrab.core.heartbeat import TICK_SLACK_SECS, heartbeat_scheduler, pulse_for
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session, session_messages
from opencrab.errors import SessionBusy
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore, heartbeat_key, turn_key
from opencrab.store.tables import events, heartbeat_log
from tests.core.conftest import speak
from tests.fakes.scripted_provider import ScriptedProvider


async def test_a_turn_holds_the_sessions_lease_while_it_runs(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="aki"))
    session_id = ensure_chat_session(runtime.db, agent.id)
    store = LeaseStore(runtime.db)
    holders = []
    async for _step in runtime.turns.chat_steps(agent, "hello", session_id=session_id):
        lease = store.get(turn_key(session_id))
        holders.append(None if lease is None else lease.owner)
    assert holders
    assert set(holders) == {runtime.leases.owner}
    assert store.get(turn_key(session_id)) is None  # let go when the turn ended


async def test_a_turn_is_refused_while_another_process_runs_one_in_the_session(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="aki"))
    session_id = ensure_chat_session(runtime.db, agent.id)
    store = LeaseStore(runtime.db)
    assert store.try_acquire(turn_key(session_id), "elsewhere:1:x", ttl_secs=60)
    with pytest.raises(SessionBusy, match=f"session {session_id} is running a turn in another"):
        await runtime.chat(agent, "hello", session_id=session_id)
    assert session_messages(runtime.db, session_id) == []  # nothing of it was stored
    with runtime.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(events)).scalar() == 0
    assert scripted.requests == []

    store.release([turn_key(session_id)], "elsewhere:1:x")  # that turn ended
    scripted.outcomes.clear()
    scripted.then(speak("hi"))
    result = await runtime.chat(agent, "hello", session_id=session_id)
    assert result.reply == "hi"


async def test_a_turn_that_waits_runs_once_the_other_processs_turn_has_ended(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    """Seed 002's POST /api/sessions/{id}/messages declares no 409: it waits instead."""
    agent = runtime.agents.create(AgentCreate(name="aki"))
    session_id = ensure_chat_session(runtime.db, agent.id)
    store = LeaseStore(runtime.db)
    assert store.try_acquire(turn_key(session_id), "elsewhere:1:x", ttl_secs=600)
    scripted.outcomes.clear()
    scripted.then(speak("hi"))
    waiting = asyncio.create_task(
        runtime.chat(agent, "hello", session_id=session_id, wait_busy=True)
    )
    for _ in range(20):  # several polls of the lease: still waiting, nothing stored
        await asyncio.sleep(0.1)
        assert not waiting.done(), waiting.result()
    assert session_messages(runtime.db, session_id) == []
    assert scripted.requests == []

    store.release([turn_key(session_id)], "elsewhere:1:x")  # that turn ended
    result = await asyncio.wait_for(waiting, 120)
    assert result.reply == "hi"
    assert [m.content for m in session_messages(runtime.db, session_id)] == ["hello", "hi"]
    assert store.get(turn_key(session_id)) is None  # let go after the turn


async def test_the_scheduler_ticks_only_the_agents_whose_lease_it_holds(
    runtime: Runtime, db: Database
) -> None:
    mine = runtime.agents.create(AgentCreate(name="mine", heartbeat=HeartbeatConfig()))
    theirs = runtime.agents.create(AgentCreate(name="theirs", heartbeat=HeartbeatConfig()))
    other = LeaseKeeper(LeaseStore(db), owner="other:2:y", ttl_secs=60)
    other.want(heartbeat_key(theirs.id))
    await other.run_pass()
    scheduler = heartbeat_scheduler(runtime)
    for agent in (mine, theirs):
        scheduler.add(pulse_for(runtime, agent, scheduler), first_in=60)
    await runtime.leases.run_pass()
    assert runtime.leases.holds(heartbeat_key(mine.id))
    assert not runtime.leases.holds(heartbeat_key(theirs.id))

    for agent in (mine, theirs):  # due now, more than the slack after the lease was taken
        scheduler.add(pulse_for(runtime, agent, scheduler), first_in=2 * TICK_SLACK_SECS)
    await asyncio.sleep(2 * TICK_SLACK_SECS)
    scheduler.tick_due()
    scheduler.flush()
    with db.read() as conn:
        rows = conn.execute(sa.select(heartbeat_log.c.agent_id, heartbeat_log.c.result_json)).all()
    assert [(str(r.agent_id), r.result_json["process"]) for r in rows] == [
        (mine.id, runtime.leases.owner)
    ]
    assert (scheduler.ticks, scheduler.elsewhere) == (1, 1)
    await other.close()
