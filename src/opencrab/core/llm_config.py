"""Per-agent LLM configuration (seed 001 `AgentLlmConfig`) and the model a purpose uses.

An agent may pin a default model and per-purpose models, allow itself to switch models
(`select_llm`) within a whitelist of aliases, and carry daily and monthly budgets in USD
(core/budgets.py enforces them). Fields left empty mean "the server's choice": the
router's default and `[llm.models]`.

Model switches made with select_llm live at three durations:
- this_turn: in the engine's TurnState only;
- this_session: in `sessions.context["llm_overrides"][agent_id][purpose]`;
- permanent: in the agent's stored config.
`effective_model` applies them in that order of precedence; `agent_model` adds the
agent's default model and is what every caller asks the router for: the engine's turn
(tool_calling, or conversation for discussion speech), compaction and reflect_and_learn
(analysis).

Example:
    config = AgentLlmConfig.from_settings(settings)
    effective_model(config, "tool_calling", {}, {"tool_calling": "openai/gpt-5-mini"})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from opencrab.config import Settings
from opencrab.config.models import ModelRef
from opencrab.config.provenance import purpose_model
from opencrab.errors import NotFoundError, ValidationError
from opencrab.prompts import Language, prompts
from opencrab.store import Database
from opencrab.store.repositories.sessions import (
    find_session_context,
    session_context,
    set_session_context,
)

PURPOSES = ("thinking", "conversation", "analysis", "tool_calling", "creative", "embedding")


class AgentModels(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True
    )  # API JSON: camelCase

    thinking: ModelRef | None = None  # reasoning (strong)
    conversation: ModelRef | None = None  # replies (balanced)
    analysis: ModelRef | None = None  # summaries, analysis (fast)
    tool_calling: ModelRef | None = None  # function calling (must support tools)
    creative: ModelRef | None = None
    embedding: ModelRef | None = None


class AgentLlmConfig(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True
    )  # API JSON: camelCase

    default_provider: str | None = None  # None: the router's default
    default_model: str | None = None
    models: AgentModels = Field(default_factory=AgentModels)
    allow_self_selection: bool = True
    selectable_models: list[str] = Field(default_factory=list)  # aliases; [] = server's list
    daily_budget_usd: float | None = Field(default=None, ge=0)
    monthly_budget_usd: float | None = Field(default=None, ge=0)  # a calendar month, UTC

    @classmethod
    def from_settings(cls, settings: Settings) -> AgentLlmConfig:
        """A new agent's config: everything from the server's `[llm]` section."""
        return cls(allow_self_selection=settings.llm.self_selection.enabled)

    def default_ref(self) -> ModelRef | None:
        if self.default_provider and self.default_model:
            return ModelRef(provider=self.default_provider, model=self.default_model)
        return None


def _parse_ref(text: str) -> ModelRef:
    provider, _, model = text.partition("/")
    if not provider or not model:
        raise ValidationError(f"model reference {text!r} is not provider/model")
    return ModelRef(provider=provider, model=model)


def effective_model(
    config: AgentLlmConfig,
    purpose: str,
    turn_overrides: Mapping[str, str],
    session_overrides: Mapping[str, str],
) -> ModelRef | None:
    """The model for `purpose`: this turn's choice, this session's, the agent's, or None."""
    for overrides in (turn_overrides, session_overrides):
        chosen = overrides.get(purpose)
        if chosen:
            return _parse_ref(chosen)
    ref: ModelRef | None = getattr(config.models, purpose, None)
    return ref


def agent_model(
    config: AgentLlmConfig,
    purpose: str,
    turn_overrides: Mapping[str, str],
    session_overrides: Mapping[str, str],
) -> str:
    """The model reference ("provider/model") the agent asks for `purpose`, or "" to let
    the router choose the server's model for the purpose.

    This turn's select_llm choice, this session's, the agent's own model for the
    purpose, else the agent's default model.
    """
    ref = effective_model(config, purpose, turn_overrides, session_overrides)
    if ref is None:
        ref = config.default_ref()
    return "" if ref is None else f"{ref.provider}/{ref.model}"


WORK_PURPOSES = ("thinking", "creative")
"""Purposes of a kind of work rather than of a call: a select_llm choice for one of them
for this turn or this session makes the turn's own calls use that model (the agent
chose to think, or write, with it now); the latest choice of this turn wins, then the
session's (thinking first)."""


def turn_purpose(
    purpose: str, turn_overrides: Mapping[str, str], session_overrides: Mapping[str, str]
) -> str:
    """The purpose whose model a turn's own calls use: `purpose` (the turn's: tool_calling
    for a chat), unless thinking or creative work was chosen for this turn or session."""
    chosen = [p for p in turn_overrides if p in WORK_PURPOSES]
    if chosen:
        return chosen[-1]
    return next((p for p in WORK_PURPOSES if p in session_overrides), purpose)


def build_llm_context(
    config: AgentLlmConfig,
    overrides: Mapping[str, str] | None = None,
    *,
    language: Language,
    settings: Settings | None = None,
    server_default: str | None = None,
) -> str:
    """The 【現在のLLM設定】 section in `language`, with active overrides applied.

    Under ja it is the seed's format.

    `server_default` ("provider/model") is what the router really uses when the agent
    pins no default (it may differ from the config when a provider is unusable).
    """
    texts = prompts(language)
    overrides = overrides or {}
    default = config.default_ref()
    if default is not None:
        shown_default = f"{default.provider}/{default.model}"
    elif server_default is not None:
        shown_default = server_default
    elif settings is not None:
        shown_default = f"{settings.llm.default_provider}/{settings.llm.default_model}"
    else:
        shown_default = texts["llm_default"]

    def ref(purpose: str) -> str:
        chosen = effective_model(config, purpose, overrides, {})
        if chosen is None and settings is not None:
            chosen = purpose_model(settings, purpose)
        return texts["llm_default"] if chosen is None else f"{chosen.provider}/{chosen.model}"

    aliases = list(config.selectable_models)
    if not aliases and settings is not None:
        aliases = list(settings.llm.self_selection.allowed_aliases)
    lines = []
    for alias in aliases:
        target = settings.llm.aliases.get(alias) if settings is not None else None
        lines.append(f"- {alias}" + (f": {target.provider}/{target.model}" if target else ""))
    selectable = "\n".join(lines) if lines else texts["llm_no_models"]
    if not (
        config.allow_self_selection and (settings is None or settings.llm.self_selection.enabled)
    ):
        selectable = texts["llm_self_selection_off"]
    return texts.render(
        "llm_config",
        default=shown_default,
        thinking=ref("thinking"),
        conversation=ref("conversation"),
        tool_calling=ref("tool_calling"),
        analysis=ref("analysis"),
        selectable=selectable,
    )


# ------------------------------------------------------------------ session overrides
def session_overrides(db: Database, session_id: str | None, agent_id: str) -> dict[str, str]:
    """This session's select_llm choices of the agent: purpose -> "provider/model"."""
    if not session_id:
        return {}
    with db.read() as conn:
        context = session_context(conn, str(session_id))
    return dict(_overrides_of(context).get(str(agent_id), {}))


def set_session_override(
    db: Database, session_id: str, agent_id: str, purpose: str, ref: str
) -> None:
    """Remember a this_session model choice in the session's context."""
    if purpose not in PURPOSES:
        raise ValidationError(f"purpose {purpose!r} is not one of {', '.join(PURPOSES)}")
    _parse_ref(ref)
    with db.write() as conn:
        found = find_session_context(conn, str(session_id))
        if found is None:
            raise NotFoundError(f"no session {session_id}")
        context = found.context
        all_overrides = _overrides_of(context)
        mine = dict(all_overrides.get(str(agent_id), {}))
        mine[purpose] = ref
        all_overrides[str(agent_id)] = mine
        context["llm_overrides"] = all_overrides
        set_session_context(conn, str(session_id), context)


def _overrides_of(context: Any) -> dict[str, dict[str, str]]:
    if not isinstance(context, dict):
        return {}
    found = context.get("llm_overrides")
    if not isinstance(found, dict):
        return {}
    return {str(k): dict(v) for k, v in found.items() if isinstance(v, dict)}
