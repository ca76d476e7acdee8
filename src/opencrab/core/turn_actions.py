"""A turn's actions: each call of a reply validated, run and its result recorded.

The registry validates a call's arguments against the action's JSON Schema and refuses a
name the turn may not call (core/permissions.py), with an error result the model sees.
An action's own writes (ActionContext.pending, pending_logs) join the step that records
its result, with the skill's use count and, when the action ends the turn, the turn's
skill effectiveness (core/effectiveness.py); a turn-ending speech (send_speech,
broadcast_guidance) is recorded in that step too. Calls of one reply beyond
`[agent] max_tool_calls_per_reply` are answered unrun with an error (`refuse`).

Example:
    actions = TurnActions(registry, ctx, skills, models, recorder, result)
    actions.allow(context)
    done = await actions.act(call, call_event_id)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from opencrab.actions.base import ActionContext, ActionRegistry, ActionResult
from opencrab.core.context import TurnContext
from opencrab.core.effectiveness import TurnFacts, fold_turn
from opencrab.core.recorder import TurnRecorder
from opencrab.core.skills import Skill, SkillManager
from opencrab.core.steps import ActionDone, Spoke, TurnResult
from opencrab.core.turn_models import TurnModels
from opencrab.llm.types import ToolCall

SPEECH_ACTIONS = frozenset({"send_speech", "broadcast_guidance"})


class TurnActions:
    """Runs one turn's calls; see the module docstring."""

    def __init__(
        self,
        registry: ActionRegistry,
        ctx: ActionContext,
        skills: SkillManager,
        models: TurnModels,
        recorder: TurnRecorder,
        result: TurnResult,
    ) -> None:
        self.registry, self.ctx, self.skills = registry, ctx, skills
        self.models, self.recorder, self.result = models, recorder, result
        self.facts = TurnFacts()  # what the turn's actions did, for skill effectiveness
        self.said: Spoke | None = None  # the speech the last action made
        self.allowed: set[str] = set()
        self.active: list[Skill] = []

    def allow(self, context: TurnContext) -> None:
        """Take what the turn may call from its context."""
        self.allowed, self.active = context.allowed, context.active
        self.facts.in_context = {str(s.id) for s in context.active if not s.actions}

    async def act(self, call: ToolCall, call_event_id: UUID) -> ActionDone:
        """Validate and run one call; its result event and logs commit together."""
        arguments: Any = call.arguments
        if call.raw_arguments is not None and not isinstance(call.arguments, dict):
            arguments = call.raw_arguments  # unparseable JSON: the registry explains
        ctx = self.ctx
        ctx.pending = []  # the action's own writes join this step's transaction
        ctx.pending_logs = []  # … its memory lines this step's insert
        try:
            result = await self.registry.dispatch(call.name, arguments, ctx, allowed=self.allowed)
        finally:
            pending, ctx.pending = ctx.pending, None
            own_logs, ctx.pending_logs = ctx.pending_logs, None
        self.facts.add(call.name, success=result.success, metrics_id=ctx.turn.last_metrics_id)
        if call.name == "select_llm":
            self.models.forget_session_choices()  # it may have changed this session's choice
        action = self.registry.get(call.name)
        ends_turn = result.success and action is not None and action.ends_turn
        agent_id, active = ctx.agent.id, self.active

        def also(conn: Connection) -> None:
            for write in pending:
                write(conn)
            if ends_turn:  # the turn's last step: its effectiveness goes in with it, and
                # the use of the action's skills (with their scores: one write a skill)
                used = self.skills.offering(call.name, active)
                fold_turn(conn, agent_id, self.facts, count=used)
                self.facts = TurnFacts()
            elif result.success and action is not None:
                self.skills.record_action_use(call.name, conn=conn, active=active)

        speech = self._speech_of(call.name) if result.success else None
        if speech is not None:  # a turn-ending speech is recorded in the same step
            self.result.reply = speech
        event_id, self.said = await self.recorder.result(
            call, call_event_id, result, logs=own_logs, speech=speech, extra=also, final=ends_turn
        )
        return self._done(call, call_event_id, result, event_id)

    def ends_turn(self, done: ActionDone) -> bool:
        """True when the call's action ends the turn and it succeeded."""
        action = self.registry.get(done.name)
        return done.result.success and action is not None and action.ends_turn

    async def refuse(
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
        note = self.recorder.log(
            "system",
            f"{len(calls)} tool calls of one reply were not run (over "
            f"max_tool_calls_per_reply = {limit})",
            None,
            metadata={"refused_calls": len(calls)},
        )
        events = await self.recorder.refused(calls, result.output(), note)
        return [
            (call, self._done(call, call_event_id, result, event))
            for (call, call_event_id), event in zip(calls, events, strict=True)
        ]

    def store_only(self, calls: Sequence[ToolCall]) -> bool:
        """True when no call can change anything outside the store (see Action.store_only)."""
        for call in calls:
            action = self.registry.get(call.name)
            if action is not None and not action.store_only:
                return False
        return bool(calls)

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

    def _speech_of(self, action: str) -> str | None:
        state = self.ctx.turn
        if action in SPEECH_ACTIONS and state.speeches:
            return state.speeches[-1]
        return None
