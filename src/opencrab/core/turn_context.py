"""Building a turn's context (core/context.py `TurnContext`) from the store, in one snapshot.

The system message is the seed's sections (IDENTITY, SOUL, the agent's prompt, MEMORY,
skills, LLM config, instruction), shrunk to half the model's window; the tools are the
actions the agent may call this turn (core/permissions.py: its active skills' actions ∪
its granted tools ∪ what every agent may call, and the turn's extra actions), none for a
model without function calling (then no skill or LLM sections either: manuals of actions
it cannot call would only mislead it). The history is the session trace's events after
its latest compaction; the recorder's chain starts after the trace's newest event.

The context's small reads are sent ahead together (`queue_context_reads`: one round trip
on PostgreSQL) and all run in one read snapshot.

Example:
    context = build_turn_context(turn, message)
    messages = context.messages(texts["summary_header"])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from opencrab.actions.base import ActionRegistry, TurnState
from opencrab.config import Settings
from opencrab.core.agent import Agent
from opencrab.core.approvals import ApprovalGate
from opencrab.core.context import (
    ContextSections,
    Turn,
    TurnContext,
    history_from_events,
    prompt_section,
    queue_context_reads,
    tools_tokens,
)
from opencrab.core.llm_config import build_llm_context
from opencrab.core.memory import MemoryManager
from opencrab.core.permissions import callable_actions
from opencrab.core.recorder import TurnRecorder
from opencrab.core.skills import Skill, SkillManager
from opencrab.core.tools import granted_tool_names
from opencrab.core.turn_models import TurnModels
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import Message
from opencrab.messages import IncomingMessage
from opencrab.prompts import Prompts
from opencrab.store import Database

log = logging.getLogger(__name__)


class ContextSource(Protocol):
    """What building a turn's context reads of the turn."""

    db: Database
    settings: Settings
    router: LlmRouter
    registry: ActionRegistry
    agent: Agent
    session_id: str
    trace_id: str
    max_tokens: int | None
    extra_actions: frozenset[str]
    memory: MemoryManager
    skills: SkillManager
    texts: Prompts
    state: TurnState
    models: TurnModels
    recorder: TurnRecorder


def build_turn_context(turn: ContextSource, message: IncomingMessage) -> TurnContext:
    """The turn's context for `message` (its reads in one snapshot; blocking)."""
    with turn.db.read() as conn:  # the context's small reads: one snapshot,
        queue_context_reads(conn, turn.agent.id, turn.session_id, turn.trace_id)
        return _in_snapshot(turn, message)  # one round trip (PostgreSQL)


def _in_snapshot(turn: ContextSource, message: IncomingMessage) -> TurnContext:
    last = turn.recorder.continue_chain()
    agent = turn.agent
    active = turn.skills.get_active_skills()
    granted = granted_tool_names(turn.db, agent.id)
    allowed = callable_actions(active, granted, agent.role) | turn.extra_actions
    approval = ApprovalGate.load(turn.db, agent.id, turn.registry, allowed)
    target = turn.models.target()
    provider = turn.router.providers.get(target.provider)
    tools = turn.registry.definitions(allowed)
    if provider is not None and not provider.supports_function_calling():
        tools = []  # e.g. the embedded SmolLM2: its text answer is the reply
    window = turn.router.context_window(target)
    reserve = turn.max_tokens or min(1024, window // 4)
    budget = window - reserve - tools_tokens(tools)
    sections = _sections(turn, active)
    if not tools:  # manuals of actions it cannot call would only mislead the model
        sections.skills, sections.llm = "", ""
        sections.instruction = turn.texts["text_instruction"]
    if not sections.shrink_to(budget // 2):
        log.warning("agent %s: IDENTITY, SOUL and prompt exceed half the window", agent.id)
    system = Message.system(sections.render())
    user_text = turn.texts.render("incoming_message", text=message.content.text)
    summary: str | None = None
    turns: list[Turn] = []
    if last is not None:  # a new trace has no history to read
        summary, turns = history_from_events(turn.recorder.events.trace(turn.trace_id))
    return TurnContext(tools, budget, system, user_text, summary, turns, active, allowed, approval)


def _sections(turn: ContextSource, active: Sequence[Skill]) -> ContextSections:
    overrides = {**turn.models.session_choices(), **turn.state.llm_overrides}
    agent = turn.agent
    language = agent.language
    server_default = str(turn.router.default)
    fixed = _FIXED.get((agent.id, language))
    if fixed is None or not fixed.fits(agent, active, overrides, turn.settings, server_default):
        fixed = _Fixed(
            agent.soul,
            agent.identity,
            agent.prompt,
            agent.llm_config,
            _shown(active),
            overrides,
            turn.settings,
            server_default,
            (
                agent.identity.build_context(language),
                agent.soul.build_context(language),
                prompt_section(agent.prompt, language),
                turn.skills.build_context(active, language),
                build_llm_context(
                    agent.llm_config,
                    overrides,
                    language=language,
                    settings=turn.settings,
                    server_default=server_default,
                ),
            ),
        )
        if len(_FIXED) >= _FIXED_MAX:
            _FIXED.clear()
        _FIXED[(agent.id, language)] = fixed
    identity, soul, prompt, skills, llm = fixed.sections
    return ContextSections(
        identity=identity,
        soul=soul,
        prompt=prompt,
        memory=turn.memory.build_context(language, session_id=turn.session_id),
        skills=skills,
        llm=llm,
        language=language,
    )


@dataclass(slots=True)
class _Fixed:
    """The system message's sections that change only with the agent's version (persona,
    soul, prompt, LLM config), its active skills and its model choices: built once and
    reused while the agent, its skills and choices are equal to what they were built
    from (comparing them costs a fraction of rendering them again; the settings must be
    the very same object)."""

    soul: object
    identity: object
    prompt: str
    llm_config: object
    active: tuple[tuple[str, str, str, str], ...]
    overrides: dict[str, str]
    settings: Settings
    server_default: str
    sections: tuple[str, str, str, str, str]

    def fits(
        self,
        agent: Agent,
        active: Sequence[Skill],
        overrides: dict[str, str],
        settings: Settings,
        server_default: str,
    ) -> bool:
        return (
            settings is self.settings
            and server_default == self.server_default
            and overrides == self.overrides
            and agent.prompt == self.prompt
            and _same(agent.soul, self.soul)
            and _same(agent.identity, self.identity)
            and _same(agent.llm_config, self.llm_config)
            and _shown(active) == self.active
        )


def _shown(active: Sequence[Skill]) -> tuple[tuple[str, str, str, str], ...]:
    """What the skills section shows of each skill."""
    return tuple((s.name, s.description, s.situation_pattern, s.guidance) for s in active)


def _same(a: object, b: object) -> bool:
    return a is b or a == b


_FIXED: dict[tuple[str, str], _Fixed] = {}
_FIXED_MAX = 4096
