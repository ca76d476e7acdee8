"""Heartbeat (seed 001): every agent wakes on its own prime interval and decides to act.

One scheduler runs every agent on one event loop. Ticks follow an absolute schedule
(next = previous due time + interval), so they never drift however long a tick takes;
a tick that is late by more than an interval is skipped, not queued. An agent's ticks
fall on its own slots: its phase within its interval (from a hash of its id) counted
from the Unix epoch, so agents with the same interval do not tick in step, and every
process (every restart) puts an agent on the same slots. The seed recommends prime
intervals; any other gets a warning naming the nearest primes (`prime_warning`).

A tick makes the cheap checks first, with no LLM call: is the heartbeat on, is there
budget left (no cap that would refuse its call is spent: the agent's daily and monthly,
the fleet's; core/budgets.Standing), has anything happened in the agent's discussions
since it last spoke, how long since it last spoke or reflected. Only then may it decide:
- Speak: a discussion it takes part in has news and it was not the last to speak (and
  not in the last `min_silence_secs`): the engine runs a turn (send_speech or
  send_noreact). A discussion where a call waits for a person's decision, or for the
  turn that continues it (core/approval_followups.py), is left alone until then;
- Speak at home: nothing to answer in discussions, the agent has a home conversation
  (`heartbeat.home`: a chat session, or a channel of a gateway) and did not speak there
  on its heartbeat for `home.every_secs`: the engine runs a turn there (the agent may
  speak or pass), and a gateway's channel gets the speech through that running gateway;
- Learn: nothing to answer, but it has new logs and has not reflected for
  `reflect_every_secs`: the engine runs reflect_and_learn;
- Idle: otherwise.
Every tick is one `heartbeat_log` row; rows are written in batches.

Given a LeaseKeeper, the scheduler ticks an agent only while this process holds the
agent's heartbeat lease (`heartbeat:<agent id>`): with several processes on one database
each agent ticks in exactly one of them, the agents are shared fairly among them (the
keeper's fair share: a process that joins takes over its part), and when a process dies
its leases expire and the others take its agents over. A process that took an agent's
lease leaves a slot due before (or within TICK_SLACK_SECS after) it took it to the
previous holder, so a handover never ticks one slot twice. Log rows name the process
(`process`).

Over a runtime (core/runtime.py) the heartbeat is wired here: `heartbeat_scheduler` makes
a scheduler whose decisions run through the turn service (`heartbeat_act`: a discussion
turn, a turn at home, a reflection), `pulse_for` resumes an agent's timers from
heartbeat_log, and `start_heartbeats` is the background service every role of the
process runs (opencrab.process): all agents, followed as they change (`HeartbeatService`).

Example:
    service = await start_heartbeats(runtime, refresh_secs=5.0)
    ...
    await service.stop()
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from opencrab.config import Settings
from opencrab.core.agent import Agent, ChannelHome
from opencrab.core.budgets import Budgets, Standing
from opencrab.core.work_spans import work_span
from opencrab.messages import (
    IncomingMessage,
    InternalSource,
    MessageContent,
    OutgoingMessage,
    Sender,
)
from opencrab.offload import run_blocking
from opencrab.prompts import prompts
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import heartbeat_key
from opencrab.store.repositories import heartbeats as repo

if TYPE_CHECKING:
    from opencrab.core.runtime import Runtime

log = logging.getLogger(__name__)

Decision = Literal["speak", "learn", "idle", "skip"]
MIN_SILENCE_SECS = 30.0  # the autonomous skill: no speech within 30 s of one's own
REFLECT_EVERY_SECS = 3600.0
FLUSH_SECS = 1.0
# ticks due within this much of each other run in one wake-up (a few ms early): a
# thousand agents then wake the loop ~10 times a second instead of for every tick
TICK_SLACK_SECS = 0.1


@dataclass
class AgentPulse:
    """What the scheduler keeps about one agent between ticks (all in memory)."""

    agent_id: str
    interval_secs: float
    enabled: bool = True
    daily_budget_usd: float | None = None
    monthly_budget_usd: float | None = None
    last_reflection: float = field(default_factory=time.monotonic)
    logs_seen: int = 0  # the highest memory_sessions id of the agent seen at a reflection
    home_session: str | None = None  # the session of its home conversation, if it has one
    home_every_secs: float = 3600.0
    last_home: float = float("-inf")  # when it last spoke at home on its heartbeat


@dataclass
class Tick:
    """The outcome of one tick."""

    agent_id: str
    decision: Decision
    reason: str
    session_id: str | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    process: str | None = None  # the lease owner that ticked (None: no leases in use)
    # how long after its slot it ran (a loaded machine); negative: early, within the
    # TICK_SLACK_SECS that lets ticks due close together run in one wake-up
    late_secs: float = 0.0
    at: datetime = field(default_factory=lambda: datetime.now(UTC))  # when it ticked

    def row(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "reason": self.reason,
            "session_id": self.session_id,
            "checks": self.checks,
            "result": self.result,
        }
        if self.process is not None:
            result["process"] = self.process
        if self.late_secs:
            result["late_ms"] = round(self.late_secs * 1000)
        return {
            "agent_id": self.agent_id,
            "decision": self.decision,
            "result_json": result,
            "created_at": self.at,  # when it ticked, not when its action ended
        }


Act = Callable[[Tick], Awaitable[Any]]
"""Runs what a tick decided (an engine turn); returns something JSON-able for the log."""


class Observer:
    """The cheap checks, answered for many agents with a few grouped queries.

    Facts are refreshed at most once per `refresh_secs`, so a thousand idle agents cost
    a handful of queries per second, not thousands. With `settings`, the fleet's caps of
    `[budgets]` count too (those set through the API always do).
    """

    def __init__(
        self, db: Database, *, refresh_secs: float = 1.0, settings: Settings | None = None
    ) -> None:
        self.db = db
        self.refresh_secs = refresh_secs
        self.budgets = Budgets(db, settings)
        self.standing = Standing({}, (0.0, 0.0), (None, None))
        self._at = -1.0e9
        self.spent: dict[str, float] = {}
        self.discussions: dict[str, list[dict[str, Any]]] = {}
        self.latest_log: dict[str, int] = {}

    def refresh(self, now: float) -> None:
        if now - self._at < self.refresh_secs:
            return
        self._at = now
        midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        facts = repo.observe(self.db, since=midnight)
        self.spent = facts.spent
        self.discussions = {}
        for row in facts.discussions:
            self.discussions.setdefault(str(row["agent_id"]), []).append(row)
        self.latest_log = facts.latest_log
        self.standing = self.budgets.standing()


def decide(pulse: AgentPulse, observer: Observer, now: float) -> Tick:
    """The tick's decision from the cheap checks alone (no LLM call)."""
    agent_id = pulse.agent_id
    if not pulse.enabled:
        return Tick(agent_id, "skip", "heartbeat disabled")
    spent = observer.spent.get(agent_id, 0.0)
    checks: dict[str, Any] = {"spent_today_usd": round(spent, 6)}
    caps = (pulse.daily_budget_usd, pulse.monthly_budget_usd)
    stopped = observer.standing.stopped(agent_id, caps)
    if stopped is not None:  # the call would be refused: do not start the turn
        checks.update(
            daily_budget_usd=caps[0],
            monthly_budget_usd=caps[1],
            spent_month_usd=round(observer.standing.spent(agent_id)[1], 6),
            fleet_caps_usd=list(observer.standing.fleet_caps),
            fleet_spent_usd=[round(v, 6) for v in observer.standing.fleet],
        )
        return Tick(agent_id, "idle", f"{stopped} spent", checks=checks)
    wall = datetime.now(UTC)
    for d in observer.discussions.get(agent_id, []):
        if d["done_declared"]:
            continue
        last = d["last_speech_at"]
        since = None
        if last is not None:
            last = last if last.tzinfo else last.replace(tzinfo=UTC)
            since = (wall - last).total_seconds()
        checks.update(session_id=str(d["id"]), seconds_since_speech=since)
        if d["last_speaker"] == agent_id:
            continue  # no consecutive speech
        if since is not None and since < MIN_SILENCE_SECS:
            continue
        if d["last_speech_log"] is None and since is not None:
            continue
        return Tick(agent_id, "speak", "the discussion moved on", str(d["id"]), checks)
    if pulse.home_session is not None and now - pulse.last_home >= pulse.home_every_secs:
        checks["home"] = True
        return Tick(agent_id, "speak", "time to say something at home", pulse.home_session, checks)
    latest = observer.latest_log.get(agent_id, 0)
    checks["new_logs"] = latest - pulse.logs_seen
    checks["latest_log"] = latest
    if latest > pulse.logs_seen and now - pulse.last_reflection >= REFLECT_EVERY_SECS:
        return Tick(agent_id, "learn", "new experience since the last reflection", checks=checks)
    return Tick(agent_id, "idle", "nothing to do", checks=checks)


class HeartbeatScheduler:
    """Ticks every registered agent on its interval, on one event loop; with `leases`,
    only the agents whose heartbeat lease this process holds (the others are wanted, and
    taken over when their holder's lease expires).

    Example:
        scheduler = HeartbeatScheduler(db, act=run_turn, leases=keeper)
        scheduler.add(AgentPulse(agent.id, agent.heartbeat.interval_secs))
        await scheduler.run(stop)   # until stop.set()
    """

    def __init__(
        self,
        db: Database,
        *,
        act: Act | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        observer: Observer | None = None,
        leases: LeaseKeeper | None = None,
    ) -> None:
        self.db = db
        self.act = act
        self.leases = leases
        self.clock = clock
        self.wall = wall  # the clock slots are counted on (seconds since the epoch)
        self.observer = observer or Observer(db)
        self.pulses: dict[str, AgentPulse] = {}
        # (due, entry, agent): an agent's live entry number is in _entries, so a removed
        # or re-added agent's stale heap entry is dropped when it comes due
        self._heap: list[tuple[float, int, str]] = []
        self._entries: dict[str, int] = {}
        self._next_entry = 0
        self._pending: list[dict[str, Any]] = []
        self._running: set[asyncio.Task[None]] = set()
        self.ticks = 0
        self.elsewhere = 0  # ticks left to the process that holds the agent's lease
        self.late_skips = 0
        self.max_lateness = 0.0

    def add(self, pulse: AgentPulse, *, first_in: float | None = None) -> None:
        """Register an agent; its first tick comes at its next slot (`first_tick_in`), or
        after `first_in` seconds when given."""
        self.pulses[pulse.agent_id] = pulse
        if first_in is None:
            first_in = first_tick_in(pulse.agent_id, pulse.interval_secs, self.wall())
        due = self.clock() + first_in
        self._next_entry += 1
        self._entries[pulse.agent_id] = self._next_entry
        heapq.heappush(self._heap, (due, self._next_entry, pulse.agent_id))
        if self.leases is not None:
            self.leases.want(heartbeat_key(pulse.agent_id))

    def add_all(self, pulses: Iterable[AgentPulse]) -> None:
        for pulse in pulses:
            self.add(pulse)

    def remove(self, agent_id: str) -> None:
        self.pulses.pop(agent_id, None)  # its heap entry is dropped when it comes due
        self._entries.pop(agent_id, None)
        if self.leases is not None:
            self.leases.unwant(heartbeat_key(agent_id))

    def next_ticks(self) -> dict[str, float]:
        """Seconds until each registered agent's next tick (0 when it is due now)."""
        now = self.clock()
        return {
            agent_id: max(0.0, due - now)
            for due, entry, agent_id in self._heap
            if self._entries.get(agent_id) == entry
        }

    async def tick_now(self, agent_id: str) -> Tick:
        """Run one tick for an agent immediately (the CLI's `heartbeat tick`): by hand, so
        no heartbeat lease is asked for; a turn it runs holds its session's lease."""
        pulse = self.pulses[agent_id]
        now = self.clock()
        self.observer.refresh(now)
        tick = decide(pulse, self.observer, now)
        await self._carry_out(pulse, tick, now)
        self.flush()
        return tick

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until `stop` is set; pending log rows are flushed on the way out."""
        last_flush = self.clock()
        stopped = asyncio.ensure_future(stop.wait())  # one waiter for the whole run
        try:
            while not stop.is_set():
                delay = self.tick_due()
                wait = FLUSH_SECS if delay is None else min(delay, FLUSH_SECS)
                await asyncio.wait((stopped,), timeout=max(wait, 0.0))
                if self.clock() - last_flush >= FLUSH_SECS:
                    self.flush()
                    last_flush = self.clock()
        finally:
            stopped.cancel()
            for task in list(self._running):
                task.cancel()
            self.flush()

    def tick_due(self) -> float | None:
        """Tick every agent that is due; seconds until the next is due (None: nobody)."""
        while self._heap:
            due, entry, agent_id = self._heap[0]
            delay = due - self.clock()
            if delay > TICK_SLACK_SECS:
                return delay
            heapq.heappop(self._heap)
            if self._entries.get(agent_id) == entry:  # else removed or re-added since
                self._due(due, entry, agent_id)
        return None

    def _due(self, due: float, entry: int, agent_id: str) -> None:
        pulse = self.pulses.get(agent_id)
        if pulse is None:
            return
        now = self.clock()
        at = self.wall()  # read with `now`: `at` less the lateness is the slot, exactly
        lateness = now - due
        self.max_lateness = max(self.max_lateness, lateness)
        next_due = due + pulse.interval_secs
        while next_due <= now:  # more than an interval late: skip, never queue up
            next_due += pulse.interval_secs
            self.late_skips += 1
        heapq.heappush(self._heap, (next_due, entry, agent_id))
        # held since before the slot's earliest wake-up: a slot due before a handover is
        # the previous holder's (it ticked it, or let go first and nobody does)
        if self.leases is not None and (
            self.leases.held_for(heartbeat_key(agent_id)) <= lateness + TICK_SLACK_SECS
        ):
            self.elsewhere += 1  # another process ticks it (or nobody may, for now)
            return
        self.observer.refresh(now)
        tick = decide(pulse, self.observer, now)
        tick.at = datetime.fromtimestamp(at, UTC)
        tick.late_secs = lateness
        if self.leases is not None:
            tick.process = self.leases.owner
        self.ticks += 1
        if tick.decision in ("speak", "learn") and self.act is not None:
            task = asyncio.create_task(self._carry_out(pulse, tick, now))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        else:
            self._pending.append(tick.row())

    async def _carry_out(self, pulse: AgentPulse, tick: Tick, now: float) -> None:
        if tick.decision in ("speak", "learn") and self.act is not None:
            try:
                with work_span(  # in the trace of the session it speaks in (telemetry)
                    "heartbeat",
                    tick.decision,
                    trace_id=tick.session_id,
                    agent_id=pulse.agent_id,
                    decision=tick.decision,
                ):
                    tick.result = await self.act(tick)
            except Exception as exc:
                log.exception("heartbeat action of %s failed", pulse.agent_id)
                tick.result = {"error": f"{type(exc).__name__}: {exc}"}
            if tick.checks.get("home"):
                pulse.last_home = now
            if tick.decision == "learn":
                pulse.last_reflection = now
                pulse.logs_seen = self.observer.latest_log.get(pulse.agent_id, 0)
        self._pending.append(tick.row())

    def flush(self) -> None:
        """Write the buffered heartbeat_log rows in one transaction; the rows of agents
        deleted since they ticked are dropped (and said once in the log)."""
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        gone = repo.write_ticks(self.db, rows)
        if gone:
            count = sum(1 for r in rows if str(r["agent_id"]) in gone)
            log.info(
                "dropped %d heartbeat log row(s) of %d agent(s) deleted since they ticked: %s",
                count,
                len(gone),
                ", ".join(sorted(gone)),
            )


def reflect_due(pulse: AgentPulse, now: float) -> timedelta:
    """How long until the agent may reflect again."""
    return timedelta(seconds=max(0.0, REFLECT_EVERY_SECS - (now - pulse.last_reflection)))


def first_tick_in(agent_id: str, interval_secs: float, now: float) -> float:
    """Seconds, in (0, interval], from `now` (seconds since the epoch) until the agent's
    next slot: its slots are its phase within its interval (from a hash of its id) plus
    whole intervals since the epoch, the same in every process."""
    digest = hashlib.sha256(agent_id.encode()).digest()
    phase = interval_secs * (int.from_bytes(digest[:8], "big") / 2**64)
    return interval_secs - (now - phase) % interval_secs


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, int(n**0.5) + 1, 2))


def prime_warning(interval_secs: int) -> str | None:
    """None for a prime interval, else a warning naming the nearest primes below and above."""
    if is_prime(interval_secs):
        return None
    below = next((n for n in range(interval_secs - 1, 1, -1) if is_prime(n)), None)
    above = next(n for n in range(interval_secs + 1, 2 * interval_secs + 3) if is_prime(n))
    nearest = ", ".join(str(n) for n in (below, above) if n is not None)
    return (
        f"heartbeat interval {interval_secs} s is not a prime; nearest primes: {nearest} "
        "(prime intervals keep agents from ticking in step)"
    )


# ------------------------------------------------------------ over a runtime
DEFAULT_REFRESH_SECS = 5.0
"""How often a heartbeat service reads the agent list again (changes made elsewhere)."""


@dataclass
class HeartbeatService:
    """The process's heartbeat: one scheduler task; agents join and leave as they change.

    Agents created, changed or deleted through this process are followed at once
    (`follow`, `forget`); those changed through another process sharing the database (a
    second `opencrab up`, the CLI) when the agent list is read again, every
    `refresh_secs` (`watch`): every role of the process alike (opencrab.process).
    """

    runtime: Runtime
    scheduler: HeartbeatScheduler
    refresh_secs: float | None = DEFAULT_REFRESH_SECS
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    watcher: asyncio.Task[None] | None = None
    known: dict[str, str] = field(default_factory=dict)  # agent id -> `_signature`

    def follow(self, agent: Agent) -> None:
        """Start (or restart, after a config change) ticking `agent`."""
        warning = prime_warning(agent.heartbeat.interval_secs)
        if warning is not None and agent.heartbeat.enabled:
            log.warning("agent %s: %s", agent.name, warning)
        self.scheduler.remove(agent.id)
        self.scheduler.add(pulse_for(self.runtime, agent, self.scheduler))
        self.known[agent.id] = _signature(agent)

    def forget(self, agent_id: str) -> None:
        """Stop ticking the agent (deleted)."""
        self.scheduler.remove(agent_id)
        self.known.pop(agent_id, None)

    def follow_changes(self, agents: list[Agent]) -> None:
        """Follow `agents` (the whole list): new and changed ones (re)start, missing ones
        are forgotten, unchanged ones keep their schedule."""
        listed = {agent.id: agent for agent in agents}
        for agent_id in self.known.keys() - listed.keys():
            self.forget(agent_id)
        for agent_id, agent in listed.items():
            if self.known.get(agent_id) != _signature(agent):
                self.follow(agent)

    async def watch(self) -> None:
        """Read the agent list again every `refresh_secs` and follow it, until stopped."""
        if self.refresh_secs is None:
            return
        stopped = asyncio.ensure_future(self.stopping.wait())
        try:
            while not self.stopping.is_set():
                # asyncio.wait, not wait_for: 3.11's wait_for can swallow a cancellation
                await asyncio.wait((stopped,), timeout=self.refresh_secs)
                if self.stopping.is_set():
                    return
                try:
                    self.follow_changes(await run_blocking(self.runtime.agents.list))
                except Exception:
                    log.exception("reading the agents again failed; trying again")
        finally:
            stopped.cancel()

    async def stop(self) -> None:
        """Stop ticking and watching; buffered heartbeat_log rows are written."""
        self.stopping.set()
        for task in (self.watcher, self.task):
            if task is not None:
                await task


def _signature(agent: Agent) -> str:
    """What an agent's heartbeat depends on: a change means following it again."""
    config = agent.llm_config
    return repr((agent.heartbeat, config.daily_budget_usd, config.monthly_budget_usd))


def heartbeat_scheduler(runtime: Runtime) -> HeartbeatScheduler:
    """A heartbeat scheduler whose speak/learn decisions run through `runtime`."""
    observer = Observer(runtime.db, settings=runtime.settings)
    return HeartbeatScheduler(
        runtime.db,
        act=lambda tick: heartbeat_act(runtime, tick),
        leases=runtime.leases,
        observer=observer,
    )


async def start_heartbeats(
    runtime: Runtime, *, refresh_secs: float | None = DEFAULT_REFRESH_SECS
) -> HeartbeatService:
    """Tick every agent in the background until `stop()`; the agent list is read again
    every `refresh_secs` (None: never)."""
    service = HeartbeatService(runtime, heartbeat_scheduler(runtime), refresh_secs=refresh_secs)
    service.follow_changes(await run_blocking(runtime.agents.list))
    service.task = asyncio.create_task(service.scheduler.run(service.stopping))
    service.watcher = asyncio.create_task(service.watch())
    return service


def pulse_for(runtime: Runtime, agent: Agent, scheduler: HeartbeatScheduler) -> AgentPulse:
    """The agent's pulse, resuming its last reflection and home speech from heartbeat_log."""
    pulse = AgentPulse(
        agent.id,
        float(agent.heartbeat.interval_secs),
        enabled=agent.heartbeat.enabled,
        daily_budget_usd=agent.llm_config.daily_budget_usd,
        monthly_budget_usd=agent.llm_config.monthly_budget_usd,
        last_reflection=float("-inf"),
    )
    home = agent.heartbeat.home
    if home is not None:
        pulse.home_session = home.session_for(agent.id)
        pulse.home_every_secs = float(home.every_secs)
    row, spoke = repo.last_ticks(runtime.db, agent.id)
    for said in spoke:  # the latest speech at this home resumes its timer
        result = said.result
        if (result.get("checks") or {}).get("home") and (
            result.get("session_id") == pulse.home_session
        ):
            age = (datetime.now(UTC) - said.created_at).total_seconds()
            pulse.last_home = scheduler.clock() - age
            break
    if row is not None:
        age = (datetime.now(UTC) - row.created_at).total_seconds()
        pulse.last_reflection = scheduler.clock() - age
        checks = row.result.get("checks") or {}
        pulse.logs_seen = int(checks.get("latest_log", 0) or 0)
    return pulse


async def heartbeat_act(runtime: Runtime, tick: Tick) -> Any:
    """Carry out a tick's decision: a discussion turn (speak) or a reflection (learn)."""
    agent = runtime.agents.get(tick.agent_id)
    if tick.decision == "speak" and tick.checks.get("home") and tick.session_id:
        return await speak_at_home(runtime, agent, tick.session_id)
    if tick.decision == "speak" and tick.session_id is not None:
        from opencrab.core.discussion import Discussion

        discussion = Discussion.load(runtime.db, tick.session_id)
        outcome = await discussion.take_turn(runtime, agent)  # through the turn service
        return outcome.as_json()
    if tick.decision == "learn":
        started = time.perf_counter()
        result = await runtime.registry.dispatch(
            "reflect_and_learn", {}, runtime.action_context(agent)
        )
        return {
            "action": "reflect_and_learn",
            "success": result.success,
            "data": result.data,
            "error": result.error,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
    return None


async def speak_at_home(runtime: Runtime, agent: Agent, session_id: str) -> dict[str, Any]:
    """A heartbeat turn in the agent's home conversation; a speech is delivered there."""
    from opencrab.core.discussion import SPOKEN

    home = agent.heartbeat.home
    assert home is not None
    message = IncomingMessage.text(
        prompts(agent.language)["heartbeat_home"],
        source=InternalSource(origin="heartbeat"),
        sender=Sender(id="heartbeat"),
    )
    result = await runtime.turns.run(
        agent, message, session_id=session_id, task_type="heartbeat", purpose="conversation"
    )
    spoke = result.reply if result.stopped_by in SPOKEN else None
    outcome: dict[str, Any] = {
        "home": home.gateway,
        "sessionId": session_id,
        "spoke": spoke,
        "action": result.stopped_by,
        "error": None if result.error is None else result.error.message,
        "delivered": False,
    }
    if spoke is None or home.gateway == "session":
        outcome["delivered"] = spoke is not None  # stored in the session: that is there
        return outcome
    outlet = runtime.outlets.get(home.gateway)
    if outlet is None or not isinstance(home, ChannelHome):
        outcome["note"] = f"the {home.gateway} gateway is not running here"
        return outcome
    await outlet.send(
        OutgoingMessage(content=MessageContent(text=spoke), target=home.outlet().target())
    )
    outcome["delivered"] = True
    return outcome
