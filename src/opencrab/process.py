"""The process assembly: the background services of every role, in one order.

An OpenCrab process runs in one of three roles (see the background services in
docs/architecture.md, "Runtime and the turn service"):

- `server`: `opencrab up` serving HTTP; the app's lifespan opens it (server/app.py);
- `headless`: `opencrab up` with `[gateway.rest] enabled = false` (cli/up.py);
- `worker`: `opencrab worker`, background work and no HTTP (cli/worker.py).

`SERVICES` is the one table of background services, in the order they start: a role
starts the rows that name it, top to bottom, and stops them bottom to top when it shuts
down (SIGINT/SIGTERM for the headless roles, the end of the lifespan for the server). A
service that fails to start stops the ones started before it. Work that must run once
(heartbeats, tickets, schedules, approval follow-ups, discussions, agent-mode
sessions, the consolidation of an ended session's memory) is claimed by lease in every
role (an inbox item's notification by its row, opencrab/inbox/notifier.py), so any
process may run it and none runs one twice (store/leases.py).

Adding a service is one row: its name, the roles that run it and a start function that
returns how to stop it (None: it does not run here, e.g. `[tickets] enabled = false`).

Example:
    async with Runtime.open(settings, db=db) as runtime:
        async with running(Role.WORKER, runtime) as process:
            await stop.wait()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from opencrab.agentmode.credentials import SubAgentCredentials
from opencrab.agentmode.opening import open_runner
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.auth import TokenStore
from opencrab.core.consolidation import Consolidator
from opencrab.core.discussion import DiscussionRunner
from opencrab.core.heartbeat import DEFAULT_REFRESH_SECS, HeartbeatService, start_heartbeats
from opencrab.core.memory_index import MemoryIndexer, start_memory_index
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.gateway.serve import ChatGateways
from opencrab.inbox.notifier import InboxNotifier
from opencrab.mcp.client.stored import StoredMcpServers
from opencrab.reports.agent_mode import agent_mode_notice
from opencrab.reports.inbox import inbox_count
from opencrab.schedules.scheduler import ScheduleScheduler, start_schedules
from opencrab.server.auth import TokenWatch
from opencrab.server.inbox_live import InboxCounter
from opencrab.server.live import EventHub
from opencrab.telemetry import Telemetry, start_telemetry
from opencrab.tickets.scheduler import TicketScheduler, start_tickets

if TYPE_CHECKING:
    from opencrab.config import Settings
    from opencrab.store import Database

log = logging.getLogger(__name__)


class Role(StrEnum):
    """What a process is for: it decides which rows of SERVICES it runs."""

    SERVER = "server"  # `opencrab up`: the HTTP app and the background work
    HEADLESS = "headless"  # `opencrab up` without HTTP (`[gateway.rest] enabled = false`)
    WORKER = "worker"  # `opencrab worker`: the background work only


EVERY = frozenset(Role)
UP = frozenset({Role.SERVER, Role.HEADLESS})
HTTP = frozenset({Role.SERVER})

Stop = Callable[[], Awaitable[None]]


@dataclass
class Process:
    """One process's running services; the ones it does not run stay None."""

    role: Role
    runtime: Runtime
    refresh_secs: float = DEFAULT_REFRESH_SECS
    started: list[str] = field(default_factory=list)  # the services' names, in order
    hub: EventHub | None = None
    heartbeats: HeartbeatService | None = None
    tickets: TicketScheduler | None = None
    schedules: ScheduleScheduler | None = None
    discussions: DiscussionRunner | None = None
    agent_mode: AgentModeRunner | None = None
    consolidator: Consolidator | None = None
    token_watch: TokenWatch | None = None
    mcp: StoredMcpServers | None = None  # the MCP servers added in the dashboard, running here
    memory_index: MemoryIndexer | None = None
    telemetry: Telemetry | None = None
    inbox_counter: InboxCounter | None = None
    inbox_notifier: InboxNotifier | None = None
    chat_gateways: ChatGateways | None = None  # restarted one by one from /api/gateways

    @property
    def claim_secs(self) -> float:
        """How often discussions and agent-mode sessions nobody holds are looked for:
        every lease renewal (ttl/3), so a dead process's work moves on soon after its
        leases expire."""
        return self.runtime.settings.database.lease_ttl_secs / 3


# ------------------------------------------------------------ the services
async def _telemetry(process: Process) -> Stop | None:
    telemetry = process.telemetry = start_telemetry(process.runtime)
    if telemetry is None:
        return None
    to = telemetry.target  # said at start: what leaves the machine, and where to
    process.runtime.notices.append(
        f"telemetry: exporting traces to {to.traces_url}, metrics to {to.metrics_url}"
    )
    return telemetry.stop


async def _tool_sources(process: Process) -> Stop:
    sources = await start_tool_sources(process.runtime)
    stored = process.mcp = StoredMcpServers(process.runtime, sources)
    try:
        await stored.sync()  # the MCP servers added in the dashboard
    except BaseException:
        await stored.stop()
        await sources.stop()
        raise
    stored.start_watching()

    async def stop() -> None:
        await stored.stop()
        await sources.stop()

    return stop


async def _live_events(process: Process) -> Stop:
    hub = process.hub = EventHub(process.runtime.db)
    process.runtime.on_write.append(hub.nudge)
    feed = asyncio.create_task(hub.run(), name="live-events")

    async def stop() -> None:
        await hub.stop()
        await feed

    return stop


async def _heartbeats(process: Process) -> Stop:
    beats = process.heartbeats = await start_heartbeats(
        process.runtime, refresh_secs=process.refresh_secs
    )
    return beats.stop


async def _memory_consolidation(process: Process) -> Stop | None:
    learning = process.runtime.settings.learning
    if not learning.session_end:
        return None
    consolidator = process.consolidator = Consolidator(process.runtime)
    return _every(learning.check_secs, consolidator.sweep, "ended sessions to consolidate")


async def _tickets(process: Process) -> Stop | None:
    scheduler = process.tickets = start_tickets(process.runtime)
    return None if scheduler is None else scheduler.stop


async def _schedules(process: Process) -> Stop | None:
    scheduler = process.schedules = start_schedules(process.runtime)
    return None if scheduler is None else scheduler.stop


async def _approval_follow_ups(process: Process) -> Stop:
    follow_ups = process.runtime.approvals.follow_ups
    follow_ups.start()
    return follow_ups.aclose


async def _discussions(process: Process) -> Stop:
    runner = process.discussions = DiscussionRunner(process.runtime)
    hub = process.hub
    if hub is not None:
        runner.listeners.append(
            lambda session_id, message: hub.announce(
                session_id,
                json.dumps({**message, "sessionId": session_id}, ensure_ascii=False, default=str),
            )
        )
    claiming = _every(process.claim_secs, runner.claim_free, "discussions")

    async def stop() -> None:
        await claiming()
        await runner.close()

    return stop


async def _agent_mode(process: Process) -> Stop:
    runtime = process.runtime
    runner = process.agent_mode = open_runner(
        runtime.settings,
        runtime.db,
        credentials=SubAgentCredentials(runtime.llm_settings),
        leases=runtime.leases,
    )
    if process.telemetry is not None:
        process.telemetry.follow_agent_mode(runner)
    hub = process.hub
    if hub is not None:
        runner.listeners.append(
            lambda session_id, task_id: hub.announce(
                session_id, agent_mode_notice(runner, session_id, task_id)
            )
        )
    claiming = _every(process.claim_secs, runner.claim_free, "agent-mode sessions")

    async def stop() -> None:
        await claiming()
        await runner.close()

    return stop


async def _chat_gateways(process: Process) -> Stop:
    chats = process.chat_gateways = ChatGateways(process.runtime)
    await chats.start_all()
    return chats.stop_all


async def _memory_index(process: Process) -> Stop | None:
    runtime = process.runtime
    if not runtime.settings.agent.memory_embedding:
        return None
    indexer = process.memory_index = start_memory_index(
        runtime.db, runtime.settings, runtime.router.providers, runtime.leases
    )
    return indexer.stop


async def _inbox_count(process: Process) -> Stop:
    runtime = process.runtime
    counter = process.inbox_counter = InboxCounter(lambda: inbox_count(runtime))
    runtime.on_write.append(counter.nudge)
    counting = asyncio.create_task(counter.run(), name="inbox-count")

    async def stop() -> None:
        await counter.stop()
        await counting

    return stop


async def _inbox_notifications(process: Process) -> Stop:
    # its looks do nothing while no outlet is configured ([inbox] webhook_url,
    # [budgets] alert_outlet): a config reloaded later needs no restart of this row
    notifier = process.inbox_notifier = InboxNotifier(process.runtime)
    sending = asyncio.create_task(notifier.run(), name="inbox-notifications")

    async def stop() -> None:
        notifier.stop()
        await sending

    return stop


async def _token_watch(process: Process) -> Stop:
    watch = process.token_watch = TokenWatch(TokenStore(process.runtime.db))
    watching = asyncio.create_task(watch.run(), name="token-watch")

    async def stop() -> None:
        watch.stop()
        await watching

    return stop


@dataclass(frozen=True)
class Service:
    """One row of SERVICES: a background service, the roles running it, how it starts."""

    name: str
    roles: frozenset[Role]
    start: Callable[[Process], Awaitable[Stop | None]]


SERVICES: tuple[Service, ...] = (
    Service("telemetry", EVERY, _telemetry),  # first in, last out: it sees all the rest
    Service("tool-sources", EVERY, _tool_sources),  # the registry is whole (config's
    # and dashboard's MCP servers included; the latter followed while the process runs)
    Service("live-events", HTTP, _live_events),  # before the others: they announce to it
    Service("heartbeats", EVERY, _heartbeats),
    Service("memory-consolidation", EVERY, _memory_consolidation),
    Service("tickets", EVERY, _tickets),
    Service("schedules", EVERY, _schedules),
    Service("approval-follow-ups", EVERY, _approval_follow_ups),
    Service("discussions", EVERY, _discussions),
    Service("agent-mode", EVERY, _agent_mode),
    Service("memory-index", EVERY, _memory_index),  # embeds log lines, off the turn's path
    Service("chat-gateways", UP, _chat_gateways),
    Service("inbox-count", HTTP, _inbox_count),
    Service("inbox-notifications", EVERY, _inbox_notifications),  # after the gateways
    Service("token-watch", HTTP, _token_watch),
)
"""Every background service, in the order they start (and the reverse: they stop)."""


def services_of(role: Role) -> list[str]:
    """The names of the services `role` runs, in the order it starts them."""
    return [service.name for service in SERVICES if role in service.roles]


@asynccontextmanager
async def running(
    role: Role,
    runtime: Runtime,
    *,
    without: Collection[str] = (),
    refresh_secs: float = DEFAULT_REFRESH_SECS,
) -> AsyncIterator[Process]:
    """Start `role`'s services (less those named in `without`) in SERVICES's order; on
    exit stop them in the reverse order, each even when another failed to stop."""
    unknown = set(without) - {service.name for service in SERVICES}
    if unknown:
        raise ValueError(f"no such background service: {', '.join(sorted(unknown))}")
    process = Process(role, runtime, refresh_secs=refresh_secs)
    stops: list[tuple[str, Stop]] = []
    try:
        for service in SERVICES:
            if role not in service.roles or service.name in without:
                continue
            stop = await service.start(process)
            if stop is not None:
                stops.append((service.name, stop))
                process.started.append(service.name)
                log.info("%s: started %s", role.value, service.name)
        log.info("%s: running %s", role.value, ", ".join(process.started))
        yield process
    finally:
        for name, stop in reversed(stops):
            try:
                await stop()
            except Exception:
                log.exception("%s: stopping %s failed", role.value, name)
            else:
                log.info("%s: stopped %s", role.value, name)


async def run_until_stopped(
    role: Role,
    settings: Settings,
    db: Database,
    *,
    refresh_secs: float = DEFAULT_REFRESH_SECS,
    stop: asyncio.Event | None = None,
    notice: Callable[[str], None] = lambda text: log.warning("%s", text),
) -> None:
    """Open the runtime and run `role`'s services until `stop` is set (SIGINT and
    SIGTERM set it); the runtime's notices go to `notice`. The headless roles' main."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with (
            Runtime.open(settings, db=db) as runtime,
            running(role, runtime, refresh_secs=refresh_secs),
        ):
            for text in runtime.notices:  # the tool sources' too, once they started
                notice(text)
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _every(secs: float, claim: Callable[[], Awaitable[object]], what: str) -> Stop:
    """Call `claim` now and then every `secs` in a task; returns how to stop it."""
    stopping = asyncio.Event()

    async def loop() -> None:
        while not stopping.is_set():
            try:
                await claim()
            except Exception:
                log.exception("looking for %s to run failed; trying again", what)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), secs)

    task = asyncio.create_task(loop(), name=f"claim-{what}")

    async def stop() -> None:
        stopping.set()
        await task

    return stop
