"""Runtime: the store, router, actions, skills and engine, assembled once.

The CLI, the server and the benchmarks all open the same runtime, so an agent behaves
the same whichever way it is reached.

Turns run through `turns` (core/turns.py, the turn service), whoever starts them.

Example:
    async with Runtime.open(settings) as rt:
        agent = rt.agents.get("aki")
        result = await rt.turns.chat(agent, "hello")
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opencrab.actions.base import ActionContext, ActionRegistry, TurnState, default_registry
from opencrab.config import Settings
from opencrab.config.secrets import redact_logs, stop_redacting_logs
from opencrab.core.agent import Agent, AgentStore, ChannelHome
from opencrab.core.approval_decisions import ApprovalService
from opencrab.core.engine import SkillEngine
from opencrab.core.heartbeat import AgentPulse, HeartbeatScheduler, Observer, Tick, prime_warning
from opencrab.core.memory import MemoryManager
from opencrab.core.reservations import BudgetGuard
from opencrab.core.skill_files import SkillDoc, SkillProblem, load_standard_skills
from opencrab.core.skills import standard_skill_dirs
from opencrab.core.steps import TurnResult
from opencrab.core.tools import sync_tools
from opencrab.core.turns import TurnService
from opencrab.core.workspace import Workspace
from opencrab.llm.live_settings import LiveLlmSettings
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.messages import (
    IncomingMessage,
    InternalSource,
    MessageContent,
    MessageOutlet,
    OutgoingMessage,
    Sender,
)
from opencrab.offload import run_blocking
from opencrab.prompts import Language, prompts
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore
from opencrab.store.repositories.heartbeats import last_ticks

log = logging.getLogger(__name__)


DEFAULT_REFRESH_SECS = 5.0
"""How often a heartbeat service reads the agent list again (changes made elsewhere)."""


@dataclass
class HeartbeatService:
    """The server's heartbeat: one scheduler task; agents join and leave as they change.

    Agents created, changed or deleted through this process are followed at once
    (`follow`, `forget`); those changed through another process sharing the database (a
    second `opencrab up`, the CLI) when the agent list is read again, every
    `refresh_secs` (`watch`): `opencrab up` and `opencrab worker` alike.
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
        self.scheduler.add(self.runtime.pulse_for(agent, self.scheduler))
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
        from opencrab.offload import run_blocking

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


@dataclass
class Runtime:
    settings: Settings
    db: Database
    router: LlmRouter
    registry: ActionRegistry
    skill_docs: dict[Language, list[SkillDoc]]  # the standard skills in each language
    skill_problems: list[SkillProblem]
    engine: SkillEngine
    agents: AgentStore
    leases: LeaseKeeper  # this process's leases: turns, heartbeats (store.lease_keeper)
    recorder: MetricsRecorder | None = None
    notices: list[str] = field(default_factory=list)
    # called whenever a turn step was written (e.g. to wake the live event feed at once)
    on_write: list[Callable[[], None]] = field(default_factory=list)
    # running gateways by name, for messages OpenCrab starts itself (heartbeat at home)
    outlets: dict[str, MessageOutlet] = field(default_factory=dict)
    turns: TurnService = field(init=False)  # the only way a turn runs (core/turns.py)
    approvals: ApprovalService = field(init=False)  # held tool calls (core/approvals.py)
    # the dashboard's LLM settings over the config, applied to `router` (llm/live_settings.py)
    llm_settings: LiveLlmSettings = field(init=False)

    def __post_init__(self) -> None:
        self.turns = TurnService(self.db, self.engine, self.leases, on_write=self.on_write)
        self.engine.outlets = self.outlets  # the same dict: gateways started later count
        self.approvals = ApprovalService(self)
        self.llm_settings = LiveLlmSettings(self.settings, self.db, self.router)
        # every call of every caller reserves its estimate under the caps first
        self.router.guard = BudgetGuard(
            self.db, self.settings, self.router.price_book, self.outlets
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        db: Database | None = None,
        router: LlmRouter | None = None,
    ) -> AsyncIterator[Runtime]:
        """Open (and migrate) the store, start the router, load skills; close on exit.

        A `router` passed in (tests, benchmarks) is used as it is and not closed here.
        """
        own_db = db is None
        if db is None:
            db = Database(settings.database_url, busy_timeout_ms=settings.database.busy_timeout_ms)
            db.upgrade()
        recorder: MetricsRecorder | None = None
        own_router = router is None
        if router is None:
            recorder = MetricsRecorder(db)
            router = LlmRouter.from_settings(settings, metrics=recorder)
            await router.start()
        docs, problems = load_standard_skills(standard_skill_dirs(settings))
        registry = default_registry()
        sync_tools(db, registry)  # seed 002's tools table mirrors the actions
        runtime = cls(
            settings=settings,
            db=db,
            router=router,
            registry=registry,
            skill_docs=docs,
            skill_problems=problems,
            engine=SkillEngine(
                db=db, settings=settings, router=router, registry=registry, skill_docs=docs
            ),
            agents=AgentStore(db, settings),
            leases=LeaseKeeper(LeaseStore(db), ttl_secs=settings.database.lease_ttl_secs),
            recorder=recorder,
        )
        runtime.leases.start()
        log_filter = redact_logs(router.redactor)
        try:
            stored = await runtime.llm_settings.apply_stored()
            runtime.notices += stored
            # a provider still without a key is shown as such; calls to it say where to set it
            missing = await run_blocking(runtime.llm_settings.keys_missing)
            runtime.notices += list(missing.values())
            if router.notice:
                runtime.notices.append(router.notice)
            runtime.notices += [f"skill file skipped: {p}" for p in problems]
            yield runtime
        finally:
            stop_redacting_logs(log_filter)
            await runtime.approvals.follow_ups.aclose()
            await runtime.leases.close()
            if recorder is not None:
                await recorder.aclose()
            if own_router:
                await router.aclose()
            if own_db:
                db.close()

    # ------------------------------------------------------------ turns
    def wrote(self) -> None:
        """Tell the `on_write` listeners that events may have been written."""
        for listener in self.on_write:
            listener()

    async def chat(self, agent: Agent, text: str, **options: Any) -> TurnResult:
        """A chat turn to its end: the turn service's `chat` (core/turns.py)."""
        return await self.turns.chat(agent, text, **options)

    def action_context(self, agent: Agent, session_id: str | None = None) -> ActionContext:
        """What an action needs when run outside a turn (heartbeat reflection, the API)."""
        return ActionContext(
            agent=agent,
            db=self.db,
            settings=self.settings,
            workspace=Workspace.for_agent(self.settings, agent.id),
            memory=MemoryManager(self.db, agent.id),
            skills=self.engine.skills_for(agent),
            registry=self.registry,
            router=self.router,
            session_id=session_id,
            turn=TurnState(),
        )

    # ------------------------------------------------------------ heartbeat
    def scheduler(self) -> HeartbeatScheduler:
        """A heartbeat scheduler whose speak/learn decisions run through this runtime."""
        observer = Observer(self.db, settings=self.settings)
        return HeartbeatScheduler(
            self.db, act=self.heartbeat_act, leases=self.leases, observer=observer
        )

    async def start_heartbeats(
        self, *, refresh_secs: float | None = DEFAULT_REFRESH_SECS
    ) -> HeartbeatService:
        """Tick every agent in the background (what `up` and `worker` do) until `stop()`;
        the agent list is read again every `refresh_secs` (None: never)."""
        from opencrab.offload import run_blocking

        service = HeartbeatService(self, self.scheduler(), refresh_secs=refresh_secs)
        service.follow_changes(await run_blocking(self.agents.list))
        service.task = asyncio.create_task(service.scheduler.run(service.stopping))
        service.watcher = asyncio.create_task(service.watch())
        return service

    def pulse_for(self, agent: Agent, scheduler: HeartbeatScheduler) -> AgentPulse:
        """The agent's pulse, resuming its last reflection from heartbeat_log."""
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
        row, spoke = last_ticks(self.db, agent.id)
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

    async def heartbeat_act(self, tick: Tick) -> Any:
        """Carry out a tick's decision: a discussion turn (speak) or a reflection (learn)."""
        agent = self.agents.get(tick.agent_id)
        if tick.decision == "speak" and tick.checks.get("home") and tick.session_id:
            return await self.speak_at_home(agent, tick.session_id)
        if tick.decision == "speak" and tick.session_id is not None:
            from opencrab.core.discussion import Discussion

            discussion = Discussion.load(self.db, tick.session_id)
            outcome = await discussion.take_turn(self, agent)  # through the turn service
            return outcome.as_json()
        if tick.decision == "learn":
            started = time.perf_counter()
            result = await self.registry.dispatch(
                "reflect_and_learn", {}, self.action_context(agent)
            )
            return {
                "action": "reflect_and_learn",
                "success": result.success,
                "data": result.data,
                "error": result.error,
                "ms": round((time.perf_counter() - started) * 1000, 1),
            }
        return None

    async def speak_at_home(self, agent: Agent, session_id: str) -> dict[str, Any]:
        """A heartbeat turn in the agent's home conversation; a speech is delivered there."""
        from opencrab.core.discussion import SPOKEN

        home = agent.heartbeat.home
        assert home is not None
        message = IncomingMessage.text(
            prompts(agent.language)["heartbeat_home"],
            source=InternalSource(origin="heartbeat"),
            sender=Sender(id="heartbeat"),
        )
        result = await self.turns.run(
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
        outlet = self.outlets.get(home.gateway)
        if outlet is None or not isinstance(home, ChannelHome):
            outcome["note"] = f"the {home.gateway} gateway is not running here"
            return outcome
        await outlet.send(
            OutgoingMessage(content=MessageContent(text=spoke), target=home.outlet().target())
        )
        outcome["delivered"] = True
        return outcome
