"""The process assembly (opencrab.process): `opencrab up`'s HTTP server (the app's
lifespan), headless `up` and `opencrab worker` each start their background services from
the one table, in its order, and stop them in the reverse order; the background work
that is claimed by lease runs in all three."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from opencrab.cli.up import serve_without_http
from opencrab.cli.worker import run_worker
from opencrab.config import Settings, load_settings
from opencrab.process import SERVICES, Role, running, services_of
from opencrab.server.app import create_app
from opencrab.store import Database

Entry = Callable[[Settings, Database, asyncio.Event], Awaitable[None]]


def said(caplog: pytest.LogCaptureFixture, role: Role, verb: str) -> list[str]:
    """The services the process log says `role` started (or stopped), in that order."""
    prefix = f"{role.value}: {verb} "
    return [
        r.getMessage().removeprefix(prefix)
        for r in caplog.records
        if r.name == "opencrab.process" and r.getMessage().startswith(prefix)
    ]


async def serve_http(settings: Settings, db: Database, stop: asyncio.Event) -> None:
    """`opencrab up`'s app with everything on, from its lifespan's start to its end."""
    app = create_app(
        settings, db, heartbeat=True, tickets=True, schedules=True, auth=True, gateways=True
    )
    async with app.router.lifespan_context(app):
        await stop.wait()


async def headless(settings: Settings, db: Database, stop: asyncio.Event) -> None:
    await serve_without_http(settings, db, stop=stop)


async def worker(settings: Settings, db: Database, stop: asyncio.Event) -> None:
    await run_worker(settings, db, stop=stop)


async def run_until_started(
    entry: Entry, settings: Settings, caplog: pytest.LogCaptureFixture
) -> str:
    """Run `entry` until the log says its services run (whatever its role), then stop
    it; what that line said."""
    db = Database(settings.database_url)
    db.upgrade()
    stop = asyncio.Event()
    task = asyncio.create_task(entry(settings, db, stop))
    try:
        while True:
            assert not task.done(), task.exception()
            running = [
                r.getMessage()
                for r in caplog.records
                if r.name == "opencrab.process" and ": running " in r.getMessage()
            ]
            if running:
                return running[0]
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
        db.close()


@pytest.mark.parametrize(
    ("entry", "role"),
    [(serve_http, Role.SERVER), (headless, Role.HEADLESS), (worker, Role.WORKER)],
    ids=["up", "headless-up", "worker"],
)
async def test_each_role_starts_the_table_in_order_and_stops_it_in_reverse(
    entry: Entry, role: Role, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCRAB_AGENT__MEMORY_EMBEDDING", "true")  # every service runs
    settings = load_settings()
    caplog.set_level(logging.INFO, logger="opencrab.process")
    line = await run_until_started(entry, settings, caplog)
    # the telemetry export is off by default ([telemetry]): it does not run
    expected = [s.name for s in SERVICES if role in s.roles and s.name != "telemetry"]
    assert line == f"{role.value}: running {', '.join(expected)}"
    assert said(caplog, role, "started") == expected
    assert said(caplog, role, "stopped") == expected[::-1]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_three_roles_run_the_leased_work_in_the_same_order() -> None:
    """The telemetry export (first: it sees the others), the tool sources, heartbeats, the
    consolidation of ended sessions' memory, tickets, schedules, approval follow-ups,
    discussions and agent-mode sessions run in every role, in one order; only what needs
    HTTP or a chat connection is left to `up`."""
    shared = [s.name for s in SERVICES if s.roles == frozenset(Role)]
    assert shared == [
        "telemetry",
        "tool-sources",
        "heartbeats",
        "memory-consolidation",
        "tickets",
        "schedules",
        "approval-follow-ups",
        "discussions",
        "agent-mode",
        "memory-index",
        "inbox-notifications",
    ]
    for role in Role:
        runs = services_of(role)
        assert [name for name in runs if name in shared] == shared
    assert services_of(Role.WORKER) == shared
    assert set(services_of(Role.HEADLESS)) - set(shared) == {"chat-gateways"}
    assert set(services_of(Role.SERVER)) - set(shared) == {
        "live-events",
        "chat-gateways",
        "inbox-count",
        "token-watch",
    }


async def test_a_service_name_that_does_not_exist_is_refused(settings: Settings) -> None:
    with pytest.raises(ValueError, match=r"no such background service: heartbeat$"):
        async with running(Role.WORKER, None, without={"heartbeat"}):  # type: ignore[arg-type]
            pass
