"""Which model each of a turn's calls uses, and the request it sends.

A turn's own calls use the agent's model for the turn's purpose (tool_calling for a chat,
conversation for discussion speech), or thinking / creative when the agent chose that
work with `select_llm` this turn or this session (core/llm_config.py); compaction uses
the analysis model. The session's choices are read once per turn, and the turn's model
resolved once (the router's `resolve`), both again after a `select_llm` call
(`forget_session_choices`), the only thing that changes them within a turn.

Example:
    models = TurnModels(db, router, agent, session_id, "tool_calling", state, None)
    request = models.request(history, tools)  # model = str(models.target())
"""

from __future__ import annotations

from opencrab.actions.base import TurnState
from opencrab.core.agent import Agent
from opencrab.core.llm_config import agent_model, session_overrides, turn_purpose
from opencrab.llm.router import LlmRouter, Target
from opencrab.llm.types import ChatRequest, Message, ToolDefinition
from opencrab.store import Database


class TurnModels:
    """The models of one turn's calls; see the module docstring."""

    def __init__(
        self,
        db: Database,
        router: LlmRouter,
        agent: Agent,
        session_id: str,
        purpose: str,
        state: TurnState,
        max_tokens: int | None,
    ) -> None:
        self.db, self.router, self.agent = db, router, agent
        self.session_id, self.state = session_id, state
        self.turn_purpose, self.max_tokens = purpose, max_tokens
        self._overrides: dict[str, str] | None = None
        self._target: Target | None = None  # the turn's own calls' model, once resolved

    def session_choices(self) -> dict[str, str]:
        """This session's select_llm choices (read once per turn, and after select_llm)."""
        if self._overrides is None:
            self._overrides = session_overrides(self.db, self.session_id, self.agent.id)
        return self._overrides

    def forget_session_choices(self) -> None:
        """Read the session's choices again, and resolve the turn's model again, before
        the next call (select_llm ran)."""
        self._overrides = None
        self._target = None

    def model_for(self, purpose: str) -> str:
        """The agent's model for `purpose` this turn ("" for the router's choice)."""
        return agent_model(
            self.agent.llm_config, purpose, self.state.llm_overrides, self.session_choices()
        )

    def purpose(self) -> str:
        """The turn's purpose, or thinking / creative when chosen for now (llm_config)."""
        overrides = self.state.llm_overrides
        return turn_purpose(self.turn_purpose, overrides, self.session_choices())

    def target(self) -> Target:
        """The model of the turn's own calls, for its purpose (resolved once per turn)."""
        if self._target is None:
            purpose = self.purpose()
            self._target = self.router.resolve(self.model_for(purpose) or None, purpose)
        return self._target

    def request(self, history: list[Message], tools: list[ToolDefinition]) -> ChatRequest:
        """One model call of the turn: its model for the turn's purpose, the allowed tools."""
        return ChatRequest(
            model=str(self.target()),
            messages=list(history),
            tools=tools or None,
            tool_choice="auto" if tools else None,
            max_tokens=self.max_tokens,
        )
