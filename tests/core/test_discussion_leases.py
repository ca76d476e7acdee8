"""Discussions are claimed by lease (`discussion:<id>`): the runner that starts one holds
it and another process's runner leaves it alone; one whose holder died is claimed by the
next runner that looks; a runner that lost the lease takes no further turn."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.discussion import Discussion, DiscussionRunner
from opencrab.core.runtime import Runtime
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore, discussion_key
from opencrab.store.repositories import sessions as sessions_repo
from tests.core.conftest import speak
from tests.fakes.scripted_provider import ScriptedProvider


@pytest.fixture
def pair(runtime: Runtime) -> tuple[Agent, Agent]:
    return (
        runtime.agents.create(AgentCreate(name="ann")),
        runtime.agents.create(AgentCreate(name="ben")),
    )


def elsewhere(runtime: Runtime, owner: str) -> Runtime:
    """The same store seen from another process: its own leases (and turn service)."""
    return dataclasses.replace(runtime, leases=LeaseKeeper(LeaseStore(runtime.db), owner=owner))


async def test_the_runner_that_starts_a_discussion_runs_it_and_the_other_leaves_it(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    scripted.outcomes.clear()
    scripted.then(speak("one"), speak("two"), speak("three"))
    here, there = DiscussionRunner(runtime), DiscussionRunner(elsewhere(runtime, "other"))
    made = Discussion.create(runtime.db, theme="t", participants=[p.id for p in pair], max_turns=3)

    started = await here.start(made)
    assert here.running(started.id)
    assert await there.claim_free() == []  # its lease is held here
    assert not there.running(started.id)
    await asyncio.gather(*here.tasks.values())

    done = Discussion.load(runtime.db, started.id)
    assert (done.status, done.turn_number, done.context["ended_by"]) == (
        "completed",
        3,
        "max_turns",
    )
    assert [s.text for s in done.speeches()] == ["one", "two", "three"]
    assert len(scripted.requests) == 3  # each turn once
    assert LeaseStore(runtime.db).get(discussion_key(started.id)) is None  # let go at the end


async def test_a_discussion_whose_holder_is_gone_is_claimed_by_the_next_runner(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    scripted.outcomes.clear()
    scripted.then(speak("again"))
    made = Discussion.create(runtime.db, theme="t", participants=[p.id for p in pair], max_turns=2)
    sessions_repo.update_context(runtime.db, made.id, lambda context: {**context, "runner": True})
    store = LeaseStore(runtime.db)
    key = discussion_key(made.id)
    taken_at = time.time()
    assert store.try_acquire(key, "a process that stopped renewing", ttl_secs=1.0)
    runner = DiscussionRunner(runtime)
    claimed: list[str] = []
    while not claimed:  # until its lease expired: never while it was live
        claimed = await runner.claim_free()
        assert claimed == [] or time.time() >= taken_at + 1.0
        await asyncio.sleep(0.02)

    assert claimed == [made.id]
    await asyncio.gather(*runner.tasks.values())
    assert Discussion.load(runtime.db, made.id).status == "completed"
    assert len(scripted.requests) == 2


async def test_a_runner_that_lost_the_lease_takes_no_further_turn(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    made = Discussion.create(runtime.db, theme="t", participants=[p.id for p in pair], max_turns=2)
    outcome = await made.run(runtime, held=lambda: False)
    assert (outcome.status, outcome.turns) == ("active", [])
    assert scripted.requests == []
    assert Discussion.load(runtime.db, made.id).turn_number == 0
