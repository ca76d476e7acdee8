"""SkillEngine (seed 001 "Engine"): the think-act loop of one agent turn.

A turn is an async generator of typed steps (core/steps.py, in the order documented
there); callers run turns through the turn service (core/turns.py), which drives `run`.
Each step is durable before it is yielded: its AgentEvents, memory session logs, session
messages and its model call's metrics row are written in one transaction (core/recorder.py).

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
from dataclasses import replace
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy.engine import Connection

from opencrab.actions.base import ActionContext, ActionRegistry, ActionResult, TurnState
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentStore
from opencrab.core.approvals import ApprovalGate, hold_calls
from opencrab.core.budgets import CostCap, fleet_caps_of
from opencrab.core.compaction import compaction_records, plan_compaction, summary_request
from opencrab.core.context import (
    ContextSections,
    Turn,
    estimate_tokens,
    extractive_summary,
    history_from_events,
    message_tokens,
    prompt_section,
    queue_context_reads,
    tools_tokens,
)
from opencrab.core.deadline import TurnDeadline
from opencrab.core.effectiveness import TurnFacts, fold_turn
from opencrab.core.llm_config import (
    agent_model,
    build_llm_context,
    session_overrides,
    turn_purpose,
)
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.permissions import callable_actions
from opencrab.core.recorder import (
    TurnRecorder,
    defused,
    now,
    tool_message,
    usage_event,
)
from opencrab.core.reservations import CallBudget
from opencrab.core.running import RunningTurns
from opencrab.core.sessions import Said
from opencrab.core.skill_files import SkillDoc
from opencrab.core.skills import PlannedSkills, Skill, SkillManager
from opencrab.core.steps import (
    ActionDone,
    Compacted,
    EngineStep,
    LlmReplied,
    SessionMessage,
    Spoke,
    TextDelta,
    TurnFailed,
    TurnResult,
    TurnStarted,
)
from opencrab.core.tools import granted_tool_names
from opencrab.core.workspace import Workspace
from opencrab.errors import BudgetExceeded, EmptyReply, LlmError, OpenCrabError, TurnTimeout
from opencrab.event_log import EventLog
from opencrab.events import (
    AgentEvent,
    ToolResultEvent,
    ToolResultPayload,
)
from opencrab.llm.router import CallInfo, LlmRouter, StreamResult, Target
from opencrab.llm.types import ChatRequest, ChatResponse, Message, ToolCall, ToolDefinition
from opencrab.messages import IncomingMessage, InternalSource, MessageOutlet
from opencrab.offload import run_blocking
from opencrab.prompts import Language, prompts
from opencrab.store import Database
from opencrab.store.repositories.budgets import fleet_caps_later

log = logging.getLogger(__name__)

MAX_ITERATIONS = 10
Prepared = tuple[list[ToolDefinition], int, Message, str, str | None, list[Turn]]
"""A turn's tools, token budget, system message, user text and stored history."""
SPEECH_ACTIONS = frozenset({"send_speech", "broadcast_guidance"})


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
        turn = _Turn(self, agent, session_id, task_type, turn_number, max_tokens, trace_id, purpose)
        turn.extra_actions = extra_actions
        turn.cost_cap = cost_cap
        with self.running.turn(agent.id, session_id):
            async for step in turn.run(message, stream=stream):
                yield step

    def first_request(self, agent: Agent, text: str) -> tuple[ChatRequest, CallInfo]:
        """The model request a new chat's first turn would send for `text`, built by the
        turn's own context code; it only reads (skills as if ensured; no session, no event)."""
        skills = PlannedSkills(self.db, agent.id, self.skill_docs.get(agent.language, ()))
        turn = _Turn(self, agent, str(uuid4()), "preview", None, None, skills=skills)
        message = IncomingMessage.text(text, source=InternalSource(origin="preview"))
        tools, _, system, user_text, _, _ = turn._prepare(message)
        request = turn._request([system, Message.user(user_text)], tools)
        return request, CallInfo(purpose=turn.purpose, task_type="preview", agent_id=agent.id)

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
    ) -> None:
        self.engine = engine
        self.agent = agent
        self.session_id = session_id
        self.trace_id = trace_id or session_id
        self.task_type = task_type
        self.purpose = purpose
        self.max_tokens = max_tokens
        db, settings = engine.db, engine.settings
        self.memory = MemoryManager(db, agent.id)
        self.texts = prompts(agent.language)
        self.skills = skills or engine.skills_for(agent)
        self.workspace = Workspace.for_agent(settings, agent.id)
        self.state = TurnState(trace_id=self.trace_id, turn_number=turn_number or 0)
        self.ctx = ActionContext(
            agent=agent,
            db=db,
            settings=settings,
            workspace=self.workspace,
            memory=self.memory,
            skills=self.skills,
            registry=engine.registry,
            router=engine.router,
            session_id=session_id,
            turn=self.state,
        )
        self.result = TurnResult(session_id=session_id, trace_id=self.trace_id)
        self.facts = TurnFacts()  # what the turn's actions did, for skill effectiveness
        self.last_event: UUID | None = None  # read by _prepare
        self.recorder = TurnRecorder(
            db,
            self.engine.events,
            self.memory,
            settings.agent.max_event_bytes,
            session_id,
            self.trace_id,
            agent,
            self.state,
        )
        self.recorder.read_along = fleet_caps_later
        self._overrides: dict[str, str] | None = None
        self._call_events = []
        self._calls: list[ToolCall] = []  # the tool calls of the latest reply
        self._answered: set[UUID] = set()  # … those whose result is recorded
        self._partial = ""  # the text streamed so far by the current call
        self.turn_id = ""  # the id of the turn's user event
        self.deadline = TurnDeadline(settings.agent.turn_timeout_secs)  # started by run

    # ------------------------------------------------------------ the loop
    async def run(self, message: IncomingMessage, *, stream: bool) -> AsyncIterator[EngineStep]:
        self.deadline.start()
        # one hop to a worker thread reads the context and, when the history fits,
        # records the user's message too (compaction needs a model call in between)
        prepared, started = await run_blocking(self._open, message)
        tools, budget, system, user_text, summary, turns = prepared
        if started is None:
            fixed = message_tokens(system) + estimate_tokens(user_text) + 8
            compacted = await self._fit_history(summary, turns, budget - fixed)
            if compacted is not None:
                summary, turns = compacted[0].summary, compacted[1]
                yield compacted[0]
            started = await self.recorder.record(*self._user_rows(message))
        yield TurnStarted(self.session_id, self.trace_id, self.turn_id, next(iter(started), None))

        history: list[Message] = [system]
        if summary:
            history.append(Message.user(self.texts["summary_header"] + summary))
        for old in turns:
            history += old.messages
        history.append(Message.user(user_text))

        try:
            async for step in self._iterate(history, tools, stream):
                if isinstance(step, TurnResult) and self.facts.anything():  # not folded yet
                    await run_blocking(self.skills.record_turn, self.facts)
                yield step
        except (asyncio.CancelledError, GeneratorExit):
            self._interrupted()
            raise
        finally:  # a call no event names (an unused summary) is still counted
            self.recorder.release(self.engine.router.metrics)

    async def _iterate(
        self, history: list[Message], tools: list[ToolDefinition], stream: bool
    ) -> AsyncIterator[EngineStep]:
        """Call the model and run its actions until the turn ends."""
        for iteration in range(1, self.engine.max_iterations + 1):
            self.result.iterations = iteration
            try:
                self.deadline.check()
                self._hold_to_caps()
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
            self.cost_usd += reply.cost_usd or 0.0
            replied = await self._record_reply(reply)
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
                yield await self._speak(reply.text, via="message", parent=self.last_event)
                self.result.stopped_by = "message"
                yield self.result
                return
            history.append(Message.assistant(reply.text or None, list(reply.tool_calls)))
            limit = self.engine.settings.agent.max_tool_calls_per_reply
            calls = list(zip(reply.tool_calls, self._call_events, strict=True))
            for call, call_event_id in calls[:limit]:
                if self.approval.needs(call.name, call.arguments):  # a person decides first
                    rest = calls[calls.index((call, call_event_id)) :]
                    for step in await hold_calls(self, rest, waiting, self._answered):
                        yield step
                    return
                done = await self._act(call, call_event_id)
                if waiting is not None:
                    yield waiting
                    waiting = None
                history.append(tool_message(call, done))
                yield done
                action = self.engine.registry.get(call.name)
                if done.result.success and action is not None and action.ends_turn:
                    if self._said is not None:
                        yield self._said
                    self.result.stopped_by = call.name
                    yield self.result
                    return
            for call, done in await self._refuse(calls[limit:], limit):
                history.append(tool_message(call, done))
                yield done
        self.result.stopped_by = "max_iterations"
        await self.recorder.record(
            [],
            [
                SessionLog(
                    session_id=self.session_id,
                    log_type="system",
                    content=f"turn stopped after {self.engine.max_iterations} iterations "
                    "without speaking",
                    turn_number=self.state.turn_number or None,
                )
            ],
            [],
        )
        yield self.result

    # ------------------------------------------------------------ context
    def _open(self, message: IncomingMessage) -> tuple[Prepared, list[SessionMessage] | None]:
        """The turn's context, and the user's message recorded when no compaction is due
        (None: not recorded yet). Runs in a worker thread, in one transaction whose reads
        see one snapshot (the message's rows go with its COMMIT)."""
        with self.engine.db.write(snapshot=True) as conn:
            prepared = self._prepare(message)
            _, budget, system, user_text, summary, turns = prepared
            fixed = message_tokens(system) + estimate_tokens(user_text) + 8
            if plan_compaction(summary, turns, budget - fixed) is not None:
                return prepared, None
            stored = self.recorder.write(conn, *self._user_rows(message))
        return prepared, stored()

    def _user_rows(
        self, message: IncomingMessage
    ) -> tuple[list[AgentEvent], list[SessionLog], list[Said]]:
        """The user's message as the turn's first step (see TurnRecorder.user_rows)."""
        rows = self.recorder.user_rows(message, parent=self.last_event)
        self.last_event = rows[0][0].id
        self.turn_id = str(self.last_event)
        return rows

    def _prepare(self, message: IncomingMessage) -> Prepared:
        """Tools, token budget, system message, user text and stored history of the turn."""
        with self.engine.db.read() as conn:  # the context's small reads: one snapshot,
            queue_context_reads(conn, self.agent.id, self.session_id, self.trace_id)
            return self._prepare_in_snapshot(message)  # one round trip (PostgreSQL)

    def _prepare_in_snapshot(self, message: IncomingMessage) -> Prepared:
        self.last_event = self.engine.events.last_id(self.trace_id)
        active = self.active = self.skills.get_active_skills()
        self.facts.in_context = {str(s.id) for s in active if not s.actions}
        self.allowed = self._allowed(active)
        engine = self.engine  # whose calls wait for a person (core/approvals.py)
        self.approval = ApprovalGate.load(engine.db, self.agent.id, engine.registry, self.allowed)
        target = self._target()
        provider = self.engine.router.providers.get(target.provider)
        tools = self.engine.registry.definitions(self.allowed)
        if provider is not None and not provider.supports_function_calling():
            tools = []  # e.g. the embedded SmolLM2: its text answer is the reply
        window = self.engine.router.context_window(target)
        reserve = self.max_tokens or min(1024, window // 4)
        budget = window - reserve - tools_tokens(tools)
        sections = self._sections(active)
        if not tools:  # manuals of actions it cannot call would only mislead the model
            sections.skills, sections.llm = "", ""
            sections.instruction = self.texts["text_instruction"]
        if not sections.shrink_to(budget // 2):
            log.warning("agent %s: IDENTITY, SOUL and prompt exceed half the window", self.agent.id)
        system = Message.system(sections.render())
        user_text = self.texts.render("incoming_message", text=message.content.text)
        summary: str | None = None
        turns: list[Turn] = []
        if self.last_event is not None:  # a new trace has no history to read
            summary, turns = history_from_events(self.engine.events.trace(self.trace_id))
        return tools, budget, system, user_text, summary, turns

    def _session_overrides(self) -> dict[str, str]:
        """This session's select_llm choices, read once per turn (and after select_llm)."""
        if self._overrides is None:
            self._overrides = session_overrides(self.engine.db, self.session_id, self.agent.id)
        return self._overrides

    def _sections(self, active: Sequence[Skill]) -> ContextSections:
        overrides = self._session_overrides()
        language = self.agent.language
        return ContextSections(
            identity=self.agent.identity.build_context(language),
            soul=self.agent.soul.build_context(language),
            prompt=prompt_section(self.agent.prompt, language),
            memory=self.memory.build_context(language, session_id=self.session_id),
            skills=self.skills.build_context(active, language),
            llm=build_llm_context(
                self.agent.llm_config,
                {**overrides, **self.state.llm_overrides},
                language=language,
                settings=self.engine.settings,
                server_default=str(self.engine.router.default),
            ),
            language=language,
        )

    def _model_for(self, purpose: str) -> str:
        """The agent's model for `purpose` this turn ("" for the router's choice)."""
        return agent_model(
            self.agent.llm_config, purpose, self.state.llm_overrides, self._session_overrides()
        )

    def _purpose(self) -> str:
        """The turn's purpose, or thinking / creative when chosen for now (llm_config)."""
        overrides = self.state.llm_overrides
        return turn_purpose(self.purpose, overrides, self._session_overrides())

    def _target(self) -> Target:
        """The model of the turn's own calls, for its purpose."""
        purpose = self._purpose()
        return self.engine.router.resolve(self._model_for(purpose) or None, purpose)

    async def _fit_history(
        self, summary: str | None, turns: list[Turn], budget: int
    ) -> tuple[Compacted, list[Turn]] | None:
        """Drop (after summarising) the oldest turns until the history fits `budget`."""
        plan = plan_compaction(summary, turns, budget)
        if plan is None:
            return None
        text, reply = await self._summarise(summary, plan.dropped)
        event, note, step = compaction_records(
            plan,
            text,
            by_model=reply is not None,
            trace_id=self.trace_id,
            parent=self.last_event,
            session_id=self.session_id,
            texts=self.texts,
        )
        batch: list[AgentEvent] = [event]
        if reply is not None:
            batch.append(usage_event(reply, event))
        self.last_event = event.id
        await self.recorder.record(batch, [note], [])
        return step, plan.kept

    async def _summarise(
        self, previous: str | None, dropped: Sequence[Turn]
    ) -> tuple[str, ChatResponse | None]:
        language = self.agent.language
        model = self._model_for("analysis")
        request = summary_request(
            previous, dropped, model=model, language=language, texts=self.texts
        )
        try:
            self._hold_to_caps()
            reply = await self.deadline.bound(
                self.engine.router.chat(request, self._info("analysis", "compaction"))
            )
        except (BudgetExceeded, LlmError, TurnTimeout) as exc:
            log.info("summary by model failed (%s); keeping an extract", exc)
            return extractive_summary(dropped, language), None
        self.cost_usd += reply.cost_usd or 0.0
        text = reply.text.strip()
        if not text:  # unused: its metrics row is written now, with no event to wait for
            self.recorder.release(self.engine.router.metrics)
            return extractive_summary(dropped, language), None
        return text, reply

    # ------------------------------------------------------------ calls and actions
    def _hold_to_caps(self) -> None:
        """The caps the turn's next call is held to (its CallInfo.budget): the router's
        guard reserves the call's estimated cost under them before it runs, or refuses it
        with BudgetExceeded (core/reservations.py), so nothing is read here. The fleet's
        caps come with the last step when it read them (recorder.read_along; else the
        guard reads them, and when no cap applies nothing is reserved); the turn's cost
        cap counts this turn's calls so far."""
        read, self.recorder.read_result = self.recorder.read_result, None
        stored = None if read is None else read()
        fleet = None if read is None else fleet_caps_of(stored, self.engine.settings)
        cap = self.cost_cap
        if cap is not None:  # the stretch's spend before this turn, and this turn's
            cap = replace(cap, spent_usd=cap.spent_usd + self.cost_usd)
        self._budget = CallBudget.of(self.agent, cap, fleet, stored is not None)

    def _info(self, purpose: str, task_type: str | None = None) -> CallInfo:
        """Who a call is for; its metrics row comes back to the recorder (one transaction
        with its token_usage event)."""
        return CallInfo(
            purpose=purpose,
            task_type=task_type or self.task_type,
            agent_id=self.agent.id,
            session_id=self.session_id,
            records=self.recorder.calls,
            budget=self._budget,
        )

    def _request(self, history: list[Message], tools: list[ToolDefinition]) -> ChatRequest:
        """One model call of the turn: its model for the turn's purpose, the allowed tools."""
        return ChatRequest(
            model=str(self._target()),
            messages=list(history),
            tools=tools or None,
            tool_choice="auto" if tools else None,
            max_tokens=self.max_tokens,
        )

    async def _call(
        self, history: list[Message], tools: list[ToolDefinition], stream: bool
    ) -> AsyncIterator[TextDelta | ChatResponse]:
        request = self._request(history, tools)
        info = self._info(self._purpose())
        if not stream:
            yield await self.deadline.bound(self.engine.router.chat(request, info))
            return
        holder = StreamResult()
        chunks = self.engine.router.stream(request, info, holder)
        try:
            while (chunk := await self.deadline.bound(anext(chunks, None))) is not None:
                if chunk.text:
                    yield TextDelta(chunk.text)
        finally:
            await chunks.aclose()  # a stream cut off by the deadline lets go of its connection
        assert holder.response is not None
        yield holder.response

    async def _record_reply(self, reply: ChatResponse) -> LlmReplied:
        """Write the reply's reasoning, tool_call events and token usage in one transaction."""
        reply.tool_calls[:] = [defused(call) for call in reply.tool_calls]
        self._calls = list(reply.tool_calls)
        self._answered = set()
        batch, logs, self._call_events = self.recorder.reply_rows(reply, parent=self.last_event)
        parent = self._call_events[-1] if self._call_events else self.last_event
        if batch and self._store_only(reply.tool_calls):
            self.recorder.held = (batch, logs)  # committed with the first call's result
            self.last_event = parent
        elif batch:
            self.last_event = parent
            await self.recorder.record(batch, logs, [])
        if not reply.tool_calls:
            self.recorder.pending_usage = reply  # hangs off the message event _speak writes
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

    async def _act(self, call: ToolCall, call_event_id: UUID) -> ActionDone:
        """Validate and run one call; its result event and logs commit together."""
        arguments: Any = call.arguments
        if call.raw_arguments is not None and not isinstance(call.arguments, dict):
            arguments = call.raw_arguments  # unparseable JSON: the registry explains
        self.ctx.pending = []  # the action's own writes join this step's transaction
        self.ctx.pending_logs = []  # … its memory lines this step's insert
        try:
            result = await self.engine.registry.dispatch(
                call.name, arguments, self.ctx, allowed=self.allowed
            )
        finally:
            pending, self.ctx.pending = self.ctx.pending, None
            own_logs, self.ctx.pending_logs = self.ctx.pending_logs, None
        summary = result.output()
        event = ToolResultEvent(
            id=uuid4(),
            trace_id=self.recorder.trace_uuid,
            parent_id=self.last_event,
            timestamp=now(),
            content=ToolResultPayload(
                output=summary, tool_call_id=call_event_id, is_error=not result.success
            ),
            metadata={"call_id": call.id, "name": call.name},
        )
        line = self.recorder.log(
            "action",
            f"{call.name}: {summary[:500]}",
            event.id,
            metadata={
                "action": call.name,
                "success": result.success,
                "turn": self.turn_id,
                "metrics_id": self.state.last_metrics_id,
            },
        )
        self.facts.add(call.name, success=result.success, metrics_id=self.state.last_metrics_id)

        if call.name == "select_llm":
            self._overrides = None  # it may have changed this session's choice

        action = self.engine.registry.get(call.name)
        ends_turn = result.success and action is not None and action.ends_turn

        def also(conn: Connection) -> None:
            for write in pending:
                write(conn)
            if result.success and action is not None:
                self.skills.record_action_use(call.name, conn=conn, active=self.active)
            if ends_turn:  # the turn's last step: its effectiveness goes in with it
                fold_turn(conn, self.agent.id, self.facts)
                self.facts = TurnFacts()

        batch: list[AgentEvent] = [event]
        logs = [line, *own_logs]
        chat: list[Said] = []
        speech = self._speech_of(call.name) if result.success else None
        if speech is not None:  # a turn-ending speech is recorded in the same step
            said, said_log, chat = self.recorder.speech_rows(speech, via=call.name, parent=event.id)
            batch += said
            logs.append(said_log)
        self._answered.add(call_event_id)
        self.last_event = event.id
        self._said = None if speech is None else self._spoken(batch[1], speech, call.name)
        stored = await self.recorder.record(batch, logs, chat, extra=also)
        if self._said is not None:
            self._said.message = next(iter(stored), None)
        return self._done(call, call_event_id, result, event.id)

    def _done(
        self, call: ToolCall, call_event_id: UUID, result: ActionResult, result_event: UUID
    ) -> ActionDone:
        """An answered call, counted among the turn's actions."""
        done = ActionDone(
            name=call.name,
            arguments=call.arguments,
            result=result,
            call_event_id=str(call_event_id),
            result_event_id=str(result_event),
        )
        self.result.actions.append(done)
        return done

    async def _refuse(
        self, calls: Sequence[tuple[ToolCall, UUID]], limit: int
    ) -> list[tuple[ToolCall, ActionDone]]:
        """Answer the calls of a reply beyond the first `limit` with an error, in one step."""
        if not calls:
            return []
        result = ActionResult.fail(
            f"not run: this reply made {limit + len(calls)} tool calls and at most {limit} "
            "are run from one reply ([agent] max_tool_calls_per_reply); call what still "
            "needs doing in your next reply"
        )
        batch: list[AgentEvent] = []
        answered = []
        for call, call_event_id in calls:
            event = self.recorder.result_event(
                call, call_event_id, result.output(), parent=self.last_event, is_error=True
            )
            batch.append(event)
            self.last_event = event.id
            self._answered.add(call_event_id)
            answered.append((call, self._done(call, call_event_id, result, event.id)))
        note = self.recorder.log(
            "system",
            f"{len(calls)} tool calls of one reply were not run (over "
            f"max_tool_calls_per_reply = {limit})",
            None,
            metadata={"refused_calls": len(calls)},
        )
        await self.recorder.record(batch, [note], [])
        return answered

    def _store_only(self, calls: Sequence[ToolCall]) -> bool:
        """True when no call can change anything outside the store (see Action.store_only)."""
        registry = self.engine.registry
        for call in calls:
            action = registry.get(call.name)
            if action is not None and not action.store_only:
                return False
        return bool(calls)

    def _allowed(self, active: Sequence[Skill]) -> set[str]:
        granted = granted_tool_names(self.engine.db, self.agent.id)
        return callable_actions(active, granted, self.agent.role) | self.extra_actions

    def _speech_of(self, action: str) -> str | None:
        if action in SPEECH_ACTIONS and self.state.speeches:
            return self.state.speeches[-1]
        return None

    async def _speak(self, text: str, *, via: str, parent: UUID | None) -> Spoke:
        """Record what the agent said: a message event, a speech log, a session message."""
        batch, line, chat = self.recorder.speech_rows(text, via=via, parent=parent)
        spoke = self._spoken(batch[0], text, via)
        stored = await self.recorder.record(batch, [line], chat)
        spoke.message = next(iter(stored), None)
        return spoke

    def _spoken(self, event: AgentEvent, text: str, via: str) -> Spoke:
        self.last_event = event.id
        self.result.reply = text
        return Spoke(text=text, via=via, event_id=str(event.id))

    _said: Spoke | None = None  # the speech the last action made, recorded with its result
    extra_actions: frozenset[str] = frozenset()  # callable this turn besides the agent's own
    cost_cap: CostCap | None = None  # a ticket's maxCostUsd for this stretch
    cost_usd = 0.0  # what this turn's calls cost so far
    _budget: CallBudget | None = None  # the caps of the next call (_hold_to_caps)
    _call_events: list[UUID]
    active: list[Skill]

    def _interrupted(self) -> None:
        """Record a turn stopped from outside (Ctrl-C, a cancelled task): see
        TurnRecorder.interrupted; what was said so far becomes the reply."""
        if self.result.stopped_by is not None:
            return  # the turn had ended already
        self.result.stopped_by = "interrupted"
        unanswered = [
            (call, event_id)
            for call, event_id in zip(self._calls, self._call_events, strict=True)
            if event_id not in self._answered
        ]
        partial = self._partial if self.result.reply is None else ""
        self.last_event, said = self.recorder.interrupted(unanswered, partial, self.last_event)
        if said:
            self.result.reply = partial

    async def _fail(self, exc: OpenCrabError) -> TurnFailed:
        """Record the error that ends the turn (with the usage of a reply it refuses)."""
        code = exc.code
        batch, line = self.recorder.error_rows(code, str(exc), parent=self.last_event)
        self.last_event = batch[0].id
        await self.recorder.record(batch, [line], [])
        event = batch[0]
        failed = TurnFailed(error=code, message=str(exc), event_id=str(event.id))
        self.result.error = failed
        self.result.stopped_by = code
        return failed
