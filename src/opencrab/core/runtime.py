"""Runtime: the store, router, actions, skills and engine, assembled once.

The CLI, the server, the worker and the benchmarks all open the same runtime, so an
agent behaves the same whichever way it is reached.

Turns run through `turns` (core/turns.py, the turn service), whoever starts them. The
background services over a runtime (heartbeats: core/heartbeat.py; tickets, discussions,
agent mode, gateways) are started and stopped by the process assembly, opencrab.process.

Example:
    async with Runtime.open(settings) as rt:
        agent = rt.agents.get("aki")
        result = await rt.turns.chat(agent, "hello")
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from opencrab.actions.base import ActionContext, ActionRegistry, TurnState, default_registry
from opencrab.config import Settings
from opencrab.config.secrets import redact_logs, stop_redacting_logs
from opencrab.core.agent import Agent, AgentStore
from opencrab.core.approval_decisions import ApprovalService
from opencrab.core.engine import SkillEngine
from opencrab.core.memory import MemoryManager
from opencrab.core.memory_vectors import VECTORS
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
from opencrab.messages import MessageOutlet
from opencrab.offload import run_blocking
from opencrab.prompts import Language
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore
from opencrab.store.repositories.memory_vectors import use_pgvector_if_installed

log = logging.getLogger(__name__)


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
    leases: LeaseKeeper  # this process's leases: turns, heartbeats, tickets, … (store.lease_keeper)
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
            use_pgvector_if_installed(db)  # pgvector installed since 0042 ran
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
            VECTORS.forget(db)  # its matrices would outlive it otherwise
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
