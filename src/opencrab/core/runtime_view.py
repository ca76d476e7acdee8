"""The runtime as the services it holds see it: a protocol.

ApprovalService (core/approval_decisions.py), its FollowUps (core/approval_followups.py)
and discussions (core/discussion.py) are handed the runtime that assembles them and use
its parts. They name it by this protocol, not by core.runtime.Runtime, because
core/runtime.py imports them; Runtime is the implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from opencrab.actions.base import ActionContext, ActionRegistry
    from opencrab.config import Settings
    from opencrab.core.agent import Agent, AgentStore
    from opencrab.core.engine import SkillEngine
    from opencrab.core.turns import TurnService
    from opencrab.store import Database
    from opencrab.store.lease_keeper import LeaseKeeper


class RuntimeView(Protocol):
    """The parts of core.runtime.Runtime its services use."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Database: ...

    @property
    def registry(self) -> ActionRegistry: ...

    @property
    def engine(self) -> SkillEngine: ...

    @property
    def agents(self) -> AgentStore: ...

    @property
    def leases(self) -> LeaseKeeper: ...

    @property
    def turns(self) -> TurnService: ...

    def wrote(self) -> None:
        """Tell the listeners that events may have been written."""

    def action_context(self, agent: Agent, session_id: str | None = None) -> ActionContext:
        """What an action needs when run outside a turn."""
        ...
