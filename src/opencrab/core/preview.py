"""Persona preview: how an agent would answer a sample message with an edited persona.

The edited parts (soul, identity, prompt, language) take the place of the stored ones on
a copy of the agent. The request is the one the first turn of a new chat would send,
built by the turn's own context code (`SkillEngine.first_request`: IDENTITY, SOUL, the
prompt, MEMORY, skills, LLM settings, the instruction, and the tools the agent may call),
and the agent's model answers it once through the router. The answer is shown, never
acted on: a speech action's text is the reply, other actions are listed, none runs.

Nothing of the conversation is stored: no session, message, event or memory line, and
the stored persona is untouched. The router writes the call's `llm_usage_metrics` row
like every call's (task type "preview", no session), so the spend shows in analytics
and counts against the agent's daily budget, which is checked first. The call is cut
off at `[agent] turn_timeout_secs` (TurnTimeout).

Example:
    draft = PersonaDraft(soul=edited_soul, language="ja")
    shown = await preview_persona(runtime.engine, agent, draft, "自己紹介してください")
    shown.reply, shown.system_prompt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opencrab.core.agent import Agent
from opencrab.core.budgets import enforce
from opencrab.core.deadline import TurnDeadline
from opencrab.core.engine import SkillEngine
from opencrab.core.identity import Identity
from opencrab.core.soul import Soul
from opencrab.core.turn_actions import SPEECH_ACTIONS
from opencrab.errors import EmptyReply
from opencrab.llm.types import ChatResponse
from opencrab.messages import check_message
from opencrab.offload import run_blocking
from opencrab.prompts import Language


@dataclass(frozen=True)
class PersonaDraft:
    """Edited, unsaved parts of a persona; None keeps the stored part."""

    soul: Soul | None = None
    identity: Identity | None = None
    prompt: str | None = None
    language: Language | None = None

    def apply(self, agent: Agent) -> Agent:
        """A copy of `agent` with the draft's parts in place of its own."""
        parts = {
            "soul": self.soul,
            "identity": self.identity,
            "prompt": self.prompt,
            "language": self.language,
        }
        return agent.model_copy(update={k: v for k, v in parts.items() if v is not None})


@dataclass(frozen=True)
class ChosenAction:
    """An action the model chose in its answer (shown, not run)."""

    name: str
    arguments: Any


@dataclass(frozen=True)
class PersonaPreview:
    """The model's answer to the sample message, as the agent would give it."""

    reply: str | None  # what it says: its plain answer or its speech action's content
    thought: str | None  # text it wrote beside action calls (its inner voice)
    actions: list[ChosenAction]  # the other actions it chose; none is run
    system_prompt: str
    response: ChatResponse  # model, usage, cost and latency of the call


async def preview_persona(
    engine: SkillEngine, agent: Agent, draft: PersonaDraft, message: str
) -> PersonaPreview:
    """One answer of the agent's model to `message`, with `draft` in place of the stored
    persona; nothing is stored but the call's metrics row (see the module docstring)."""
    check_message(message)
    edited = draft.apply(agent)
    request, info = await run_blocking(engine.first_request, edited, message)
    if engine.router.metrics is not None:
        await engine.router.metrics.flush()  # queued spend counts against the budget
    await enforce(engine.db, engine.settings, edited, None)
    deadline = TurnDeadline(engine.settings.agent.turn_timeout_secs)
    deadline.start()
    response = await deadline.bound(engine.router.chat(request, info))
    if not response.text.strip() and not response.tool_calls:
        raise EmptyReply(
            f"the model returned an empty reply (finish reason {response.finish_reason})",
            provider=response.provider,
            model=response.model,
        )
    return _shown(response, request.messages[0].text)


def _shown(response: ChatResponse, system_prompt: str) -> PersonaPreview:
    """What the answer says and does: a speech action's text is the reply."""
    reply: str | None = None
    actions: list[ChosenAction] = []
    for call in response.tool_calls:
        content = call.arguments.get("content") if isinstance(call.arguments, dict) else None
        said = content.strip() if isinstance(content, str) else ""
        if reply is None and call.name in SPEECH_ACTIONS and said:
            reply = said
        else:
            actions.append(ChosenAction(call.name, call.arguments))
    text = response.text.strip() or None
    if not response.tool_calls:
        return PersonaPreview(text, None, [], system_prompt, response)
    return PersonaPreview(reply, text, actions, system_prompt, response)
