"""SkillEngine (seed 001 "Engine"): the think-act loop of one agent turn.

A turn is an async generator of typed steps (core/steps.py, in the order documented
there); callers run turns through the turn service (core/turns.py), which drives `run`.
Each step is durable before it is yielded: its AgentEvents, memory session logs, session
messages and its model call's metrics row are written in one transaction, one recorder
call per record (core/recorder.py, which keeps the turn's event chain). The loop's parts
live beside it: the context (core/turn_context.py), each call's model (core/turn_models.py)
and caps (core/turn_budget.py), running a reply's calls (core/turn_actions.py) and
compaction (core/compaction.py).

    user message ─► [compaction] ─► user event
        loop ≤ max_iterations:
            budget reservation ─► LLM call (tools = allowed actions) ─► reasoning / tool_call
            events + token_usage sidecar ─► for each call: validate, run, tool_result
        stop on a turn-ending action (send_speech, broadcast_guidance, send_noreact,
        declare_done), a plain-text answer, or a call held for a person (core/approvals.py).

One reply runs at most `[agent] max_tool_calls_per_reply` calls; the others are answered
with an error result the model sees (recorded like any other). The turn's database
reads and each step's transaction run in a worker thread (opencrab.offload), so a long
reply never holds the event loop: other sessions and the health route go on meanwhile.

A turn has an overall deadline (`[agent] turn_timeout_secs`): every model call is cut off
when it passes, and no call starts after it; the turn then ends with a `turn_timeout`
error. A reply with neither text nor tool calls ends the turn with an `empty_reply` error,
never a blank message. Errors are recorded as message events with `{"kind": "error"}`.

Actions the agent may call = actions of its active standard skills ∪ its granted tools ∪
the actions on its own mind every agent has (generate_inner_voice, update_impression; no
standard skill names them), with broadcast_guidance for facilitators only; learned skills
add nothing (core/permissions.py). Any other name gets an error result the model sees.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from uuid import uuid4

from opencrab.actions.base import ActionContext, ActionRegistry, TurnState
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentStore
from opencrab.core.approvals import ApprovalGate, hold_calls
from opencrab.core.budgets import CostCap
from opencrab.core.compaction import compact, plan_compaction
from opencrab.core.context import TurnContext
from opencrab.core.deadline import TurnDeadline
from opencrab.core.memory import MemoryManager
from opencrab.core.recorder import TurnRecorder, defused, tool_message
from opencrab.core.running import RunningTurns
from opencrab.core.skill_files import SkillDoc
from opencrab.core.skills import PlannedSkills, SkillManager
from opencrab.core.steps import (
    EngineStep,
    LlmReplied,
    SessionMessage,
    TextDelta,
    TurnFailed,
    TurnResult,
    TurnStarted,
)
from opencrab.core.turn_actions import TurnActions
from opencrab.core.turn_budget import TurnBudget
from opencrab.core.turn_context import build_turn_context
from opencrab.core.turn_models import TurnModels
from opencrab.core.workspace import Workspace
from opencrab.errors import BudgetExceeded, EmptyReply, LlmError, OpenCrabError, TurnTimeout
from opencrab.event_log import EventLog
from opencrab.llm.router import CallInfo, LlmRouter, StreamResult
from opencrab.llm.types import ChatRequest, ChatResponse, Message, ToolDefinition
from opencrab.messages import IncomingMessage, InternalSource, MessageOutlet
from opencrab.prompts import Language, prompts
from opencrab.store import Database

log = logging.getLogger(__name__)

MAX_ITERATIONS = 10


# ------------------------------------------------------------------ the engine
class SkillEngine:
    """Runs agent turns: context, function calling, actions, and the record of it all.

    Example:
        engine = SkillEngine(db=db, settings=settings, router=router, registry=registry)
        result = await engine.process(agent, IncomingMessage.text("hi", source=src),
                                      session_id=session_id)
        result.reply
    """

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        router: LlmRouter,
        registry: ActionRegistry,
        skill_docs: Mapping[Language, Sequence[SkillDoc]] | None = None,
        max_iterations: int = MAX_ITERATIONS,
    ) -> None:
        self.db = db
        self.settings = settings
        self.router = router
        self.registry = registry
        self.skill_docs = {lang: list(docs) for lang, docs in (skill_docs or {}).items()}
        self.max_iterations = max_iterations
        self.events = EventLog(db)
        self.agents = AgentStore(db, settings)
        self._skills_ready: dict[str, Language] = {}  # agent id -> language ensured
        self.running = RunningTurns()  # who is in a turn now (the dashboard's status)
        # running gateways by name (the Runtime's): budget alerts are written to them
        self.outlets: dict[str, MessageOutlet] = {}

    async def process(
        self, agent: Agent, message: IncomingMessage, *, session_id: str, **options: Any
    ) -> TurnResult:
        """Run a turn to its end and return its result."""
        result: TurnResult | None = None
        async for step in self.run(agent, message, session_id=session_id, **options):
            if isinstance(step, TurnResult):
                result = step
        assert result is not None
        return result

    async def run(
        self,
        agent: Agent,
        message: IncomingMessage,
        *,
        session_id: str,
        task_type: str = "chat",
        stream: bool = False,
        turn_number: int | None = None,
        max_tokens: int | None = None,
        trace_id: str | None = None,
        purpose: str = "tool_calling",
        extra_actions: frozenset[str] = frozenset(),
        cost_cap: CostCap | None = None,
    ) -> AsyncIterator[EngineStep]:
        """The turn's steps, each durable when yielded; the last one is the TurnResult.

        A chat session is one trace (`trace_id` defaults to the session id); in a
        discussion every participant keeps its own trace within the shared session.
        `purpose` picks the agent's model for the turn's calls (discussion speech uses
        its conversation model); compaction uses its analysis model. `extra_actions` may
        be called in this turn besides the agent's own (a ticket's actions, in its
        session). `cost_cap` (a ticket's maxCostUsd) is checked before each call beside the
        agent's and the fleet's budgets. While the turn runs the agent counts as in a turn
        (`running`).
        """
        turn = _Turn(
            self,
            agent,
            session_id,
            task_type,
            turn_number,
            max_tokens,
            trace_id,
            purpose,
            extra_actions=extra_actions,
            cost_cap=cost_cap,
        )
        with self.running.turn(agent.id, session_id):
            async for step in turn.run(message, stream=stream):
                yield step

    def first_request(self, agent: Agent, text: str) -> tuple[ChatRequest, CallInfo]:
        """The model request a new chat's first turn would send for `text`, built by the
        turn's own context code; it only reads (skills as if ensured; no session, no event)."""
        skills = PlannedSkills(self.db, agent.id, self.skill_docs.get(agent.language, ()))
        turn = _Turn(self, agent, str(uuid4()), "preview", None, None, skills=skills)
        message = IncomingMessage.text(text, source=InternalSource(origin="preview"))
        context = turn._prepare(message)
        request = turn.models.request(
            [context.system, Message.user(context.user_text)], context.tools
        )
        info = CallInfo(purpose=turn.models.turn_purpose, task_type="preview", agent_id=agent.id)
        return request, info

    # ------------------------------------------------------------ helpers used by turns
    def skills_for(self, agent: Agent) -> SkillManager:
        """The agent's skills, its standard ones in its language (copied in on first use)."""
        manager = SkillManager(self.db, agent.id, self.skill_docs.get(agent.language, ()))
        if self._skills_ready.get(agent.id) != agent.language:
            manager.ensure_default_skills()
            self._skills_ready[agent.id] = agent.language
        return manager


class _Turn:
    """One turn's state; `run` is the loop."""

    def __init__(
        self,
        engine: SkillEngine,
        agent: Agent,
        session_id: str,
        task_type: str,
        turn_number: int | None,
        max_tokens: int | None,
        trace_id: str | None = None,
        purpose: str = "tool_calling",
        skills: SkillManager | None = None,
        *,
        extra_actions: frozenset[str] = frozenset(),
        cost_cap: CostCap | None = None,
    ) -> None:
        self.engine = engine
        self.db, self.settings = db, settings = engine.db, engine.settings
        self.router, self.registry = engine.router, engine.registry
        self.agent = agent
        self.session_id = session_id
        self.trace_id = trace_id or session_id
        self.task_type = task_type
        self.max_tokens = max_tokens
        self.extra_actions = extra_actions  # callable this turn besides the agent's own
        self.memory = MemoryManager(db, agent.id)
        self.texts = prompts(agent.language)
        self.skills = skills or engine.skills_for(agent)
        self.state = TurnState(trace_id=self.trace_id, turn_number=turn_number or 0)
        self.ctx = ActionContext(
            agent=agent,
            db=db,
            settings=settings,
            workspace=Workspace.for_agent(settings, agent.id),
            memory=self.memory,
            skills=self.skills,
            registry=engine.registry,
            router=engine.router,
            session_id=session_id,
            turn=self.state,
        )
        self.result = TurnResult(session_id=session_id, trace_id=self.trace_id)
        self.models = TurnModels(
            db, engine.router, agent, session_id, purpose, self.state, max_tokens
        )
        self.budget = TurnBudget(engine.router, agent, settings, cost_cap)
        self.recorder = TurnRecorder(
            db,
            engine.events,
            self.memory,
            settings.agent.max_event_bytes,
            session_id,
            self.trace_id,
            agent,
            self.state,
            read_along=self.budget,
        )
        self.actions = TurnActions(
            engine.registry, self.ctx, self.skills, self.models, self.recorder, self.result
        )
        self.context: TurnContext | None = None  # read at the start (build_turn_context)
        self._partial = ""  # the text streamed so far by the current call
        self.deadline = TurnDeadline(settings.agent.turn_timeout_secs)  # started by run

    # ------------------------------------------------------------ the loop
    async def run(self, message: IncomingMessage, *, stream: bool) -> AsyncIterator[EngineStep]:
        self.deadline.start()
        self.state.deadline = self.deadline.at
        # one store call (Database.run) reads the context and, when the history fits,
        # records the user's message too (compaction needs a model call in between)
        context, started = await self.db.run(self._open, message)
        if started is None:
            analysis = self.models.model_for("analysis")
            texts, language = self.texts, self.agent.language
            compacted = await compact(
                context,
                self.recorder,
                self._summarise,
                model=analysis,
                language=language,
                texts=texts,
            )
            if compacted is not None:
                yield compacted
            started = await self.recorder.user(message)
        user_event = self.recorder.turn_id
        yield TurnStarted(self.session_id, self.trace_id, user_event, next(iter(started), None))
        history = context.messages(self.texts["summary_header"])
        try:
            async for step in self._iterate(history, context.tools, stream):
                facts = self.actions.facts
                if isinstance(step, TurnResult) and facts.anything():  # not folded yet
                    await self.db.run(self.skills.record_turn, facts)
                yield step
        except (asyncio.CancelledError, GeneratorExit):
            self._interrupted()
            raise
        finally:  # a call no event names (an unused summary) is still counted
            self.budget.release(self.recorder.unnamed_calls())

    async def _iterate(
        self, history: list[Message], tools: list[ToolDefinition], stream: bool
    ) -> AsyncIterator[EngineStep]:
        """Call the model and run its actions until the turn ends."""
        for iteration in range(1, self.engine.max_iterations + 1):
            self.result.iterations = iteration
            try:
                self.deadline.check()
                reply = None
                self._partial = ""
                async for item in self._call(history, tools, stream):
                    if isinstance(item, TextDelta):
                        self._partial += item.text
                        yield item
                    else:
                        reply = item
                assert reply is not None
                self._partial = ""  # the reply is recorded whole from here on
            except (BudgetExceeded, LlmError, TurnTimeout) as exc:
                yield await self._fail(exc)
                yield self.result
                return
            self.state.last_metrics_id = reply.metrics_id
            self.budget.spent(reply)
            reply.tool_calls[:] = [defused(call) for call in reply.tool_calls]
            # store-only calls: the reply's events wait for the first one's result
            hold = self.actions.store_only(reply.tool_calls)
            call_events = await self.recorder.reply(reply, hold=hold)
            replied = _replied(reply)
            # durable now, or (store-only calls) with the first action's result
            waiting = replied if self.recorder.held is not None else None
            if waiting is None:
                yield replied
            if not reply.tool_calls and not reply.text.strip():
                empty = f"the model returned an empty reply (finish reason {reply.finish_reason})"
                yield await self._fail(
                    EmptyReply(empty, provider=reply.provider, model=reply.model)
                )
                yield self.result
                return
            if not reply.tool_calls:
                self.result.reply = reply.text
                yield await self.recorder.speech(reply.text, via="message")
                self.result.stopped_by = "message"
                yield self.result
                return
            history.append(Message.assistant(reply.text or None, list(reply.tool_calls)))
            limit = self.settings.agent.max_tool_calls_per_reply
            calls = list(zip(reply.tool_calls, call_events, strict=True))
            for index, (call, call_event_id) in enumerate(calls[:limit]):
                if self.approval.needs(call.name, call.arguments):  # a person decides first
                    for step in await hold_calls(self, calls[index:], waiting):
                        yield step
                    return
                done = await self.actions.act(call, call_event_id)
                if waiting is not None:
                    yield waiting
                    waiting = None
                history.append(tool_message(call, done))
                yield done
                if self.actions.ends_turn(done):
                    if self.actions.said is not None:
                        yield self.actions.said
                    self.result.stopped_by = call.name
                    yield self.result
                    return
            for call, done in await self.actions.refuse(calls[limit:], limit):
                history.append(tool_message(call, done))
                yield done
        self.result.stopped_by = "max_iterations"
        await self.recorder.note(
            f"turn stopped after {self.engine.max_iterations} iterations without speaking"
        )
        yield self.result

    # ------------------------------------------------------------ context
    def _open(self, message: IncomingMessage) -> tuple[TurnContext, list[SessionMessage] | None]:
        """The turn's context, and the user's message recorded when no compaction is due
        (None: not recorded yet). Runs through Database.run, in one transaction whose reads
        see one snapshot (the message's rows go with its COMMIT)."""
        with self.db.write(snapshot=True) as conn:
            context = self._prepare(message)
            if plan_compaction(context.summary, context.turns, context.history_budget()):
                return context, None
            stored = self.recorder.user_in(conn, message)
        return context, stored()

    def _prepare(self, message: IncomingMessage) -> TurnContext:
        """The turn's context (core/turn_context.py); what it may call comes with it."""
        context = self.context = build_turn_context(self, message)
        self.actions.allow(context)
        return context

    @property
    def approval(self) -> ApprovalGate:
        """Which of the turn's calls wait for a person (core/approvals.py)."""
        assert self.context is not None
        return self.context.approval

    async def _summarise(self, request: ChatRequest) -> ChatResponse | None:
        """The compaction summary's model call; None when it failed or said nothing."""
        try:
            reply = await self.deadline.bound(
                self.router.chat(request, self._info("analysis", "compaction"))
            )
        except (BudgetExceeded, LlmError, TurnTimeout) as exc:
            log.info("summary by model failed (%s); keeping an extract", exc)
            return None
        self.budget.spent(reply)
        if not reply.text.strip():  # unused: its metrics row is written now, with no event
            self.budget.release(self.recorder.unnamed_calls())
            return None
        return reply

    # ------------------------------------------------------------ calls and actions
    def _info(self, purpose: str, task_type: str | None = None) -> CallInfo:
        """Who a call is for and the caps it is held to (core/turn_budget.py); its
        metrics row comes back to the recorder (one transaction with its token_usage)."""
        return CallInfo(
            purpose=purpose,
            task_type=task_type or self.task_type,
            agent_id=self.agent.id,
            session_id=self.session_id,
            records=self.recorder.calls,
            budget=self.budget.next_call(),
        )

    async def _call(
        self, history: list[Message], tools: list[ToolDefinition], stream: bool
    ) -> AsyncIterator[TextDelta | ChatResponse]:
        request = self.models.request(history, tools)
        info = self._info(self.models.purpose())
        if not stream:
            yield await self.deadline.bound(self.router.chat(request, info))
            return
        holder = StreamResult()
        chunks = self.router.stream(request, info, holder)
        try:
            while (chunk := await self.deadline.bound(anext(chunks, None))) is not None:
                if chunk.text:
                    yield TextDelta(chunk.text)
        finally:
            await chunks.aclose()  # a stream cut off by the deadline lets go of its connection
        assert holder.response is not None
        yield holder.response

    def _interrupted(self) -> None:
        """Record a turn stopped from outside (Ctrl-C, a cancelled task): see
        TurnRecorder.interrupted; what was said so far becomes the reply."""
        if self.result.stopped_by is not None:
            return  # the turn had ended already
        self.result.stopped_by = "interrupted"
        partial = self._partial if self.result.reply is None else ""
        if self.recorder.interrupted(partial):
            self.result.reply = partial

    async def _fail(self, exc: OpenCrabError) -> TurnFailed:
        """Record the error that ends the turn (with the usage of a reply it refuses)."""
        event_id = await self.recorder.error(exc.code, str(exc))
        failed = TurnFailed(error=exc.code, message=str(exc), event_id=str(event_id))
        self.result.error = failed
        self.result.stopped_by = exc.code
        return failed


def _replied(reply: ChatResponse) -> LlmReplied:
    """The step announcing a recorded reply."""
    return LlmReplied(
        provider=reply.provider,
        model=reply.model,
        text=reply.text,
        tool_calls=list(reply.tool_calls),
        input_tokens=reply.usage.input_tokens,
        output_tokens=reply.usage.output_tokens,
        cost_usd=reply.cost_usd,
        latency_ms=reply.latency_ms,
        metrics_id=reply.metrics_id,
        finish_reason=reply.finish_reason,
    )
