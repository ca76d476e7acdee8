"""A `post` schedule is run by a process that runs its gateway: a process without it (a
worker) waits `post_elsewhere_secs` before claiming a slot, so the process with the
gateway records it first; with no such process at all, the run fails saying so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.llm.router import LlmRouter
from opencrab.messages import OutgoingMessage
from opencrab.schedules.scheduler import ScheduleScheduler
from opencrab.schedules.service import create_schedule, schedule_runs
from opencrab.schedules.spec import ScheduleInput
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider


class Channel:
    """The running gateway's outlet, as a process that runs it has one."""

    def __init__(self) -> None:
        self.sent: list[OutgoingMessage] = []

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)


@pytest.fixture
def quick(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("OPENCRAB_SCHEDULES__MIN_INTERVAL_SECS", "1")
    monkeypatch.setenv("OPENCRAB_SCHEDULES__REFRESH_SECS", "0.2")
    monkeypatch.setenv("OPENCRAB_SCHEDULES__POST_ELSEWHERE_SECS", "30")
    return load_settings()


async def process(stack: AsyncExitStack, settings: Settings, db: Database) -> Runtime:
    scripted = ScriptedProvider("openai", "Stand-up: all green.")  # its every answer
    router = LlmRouter(settings)
    router.register_provider(scripted)
    return await stack.enter_async_context(Runtime.open(settings, db=db, router=router))


@pytest.fixture
async def two(quick: Settings, db: Database) -> AsyncIterator[tuple[Runtime, Runtime]]:
    async with AsyncExitStack() as stack:
        yield await process(stack, quick, db), await process(stack, quick, db)


async def test_the_process_running_the_gateway_posts_every_slot(
    two: tuple[Runtime, Runtime], quick: Settings, db: Database
) -> None:
    worker, server = two
    channel = Channel()
    server.outlets["parrot"] = channel
    agent = server.agents.create(AgentCreate(name="aki", prompt="You are terse."))
    given = ScheduleInput.model_validate(
        {
            "everySecs": 1,
            "action": {
                "kind": "post",
                "prompt": "Stand-up?",
                "home": {"gateway": "parrot", "channel": "team"},
            },
        }
    )
    schedule = create_schedule(db, quick, agent.id, given, created_by="test")
    schedulers = [ScheduleScheduler(worker), ScheduleScheduler(server)]
    schedulers[0].start()  # the worker alone first: slots come due and it waits
    try:
        await asyncio.sleep(2.5)
        assert schedule_runs(db, schedule.id, limit=100) == []
        schedulers[1].start()  # then the server, which runs the gateway, claims them
        async with asyncio.timeout(60):
            while len([r for r in schedule_runs(db, schedule.id, limit=100) if r.ended_at]) < 3:
                await asyncio.sleep(0.05)
        ended = [r for r in schedule_runs(db, schedule.id, limit=100) if r.ended_at]
        sent = list(channel.sent)  # (a run still going when the schedulers stop fails)
    finally:
        for scheduler in schedulers:
            await scheduler.stop()
    statuses = [r.status for r in ended]
    assert set(statuses) <= {"succeeded", "skipped"}, [(r.status, r.detail) for r in ended]
    assert statuses.count("succeeded") >= 2  # (a slot that came during a run: skipped)
    assert schedulers[0].claims == 0
    assert len(sent) >= statuses.count("succeeded")
    assert sent[0].content.text == "Stand-up: all green."
