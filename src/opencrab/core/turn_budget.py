"""A turn's budget gate: the caps each of its model calls is held to, and its spend.

Nothing is checked here: the router's guard reserves a call's estimated cost under the
caps its CallInfo.budget names before the call runs, or refuses it with BudgetExceeded
(core/reservations.py). The gate says which caps those are: the agent's, a ticket's
cost cap (`maxCostUsd`, counting this turn's calls so far) and the fleet's. The fleet's
caps are read along with each step's transaction (core/recorder.py `ReadAlong`: on
PostgreSQL they come with its COMMIT); when no step has read them since the last call,
the guard reads them itself. Calls no event of the turn named (a summary the turn did
not use) are handed to the router's metrics writer by `release`.

Example:
    gate = TurnBudget(router, agent, settings, cost_cap)
    info = CallInfo(agent_id=agent.id, budget=gate.next_call())
    reply = await router.chat(request, info)
    gate.spent(reply)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Connection

from opencrab.config import Settings
from opencrab.core.agent import Agent
from opencrab.core.budgets import CostCap, fleet_caps_of
from opencrab.core.reservations import CallBudget
from opencrab.llm.metrics import CallRecord
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatResponse
from opencrab.store.repositories.budgets import fleet_caps_later


class TurnBudget:
    """The caps of one turn's calls and what they cost so far; see the module docstring."""

    def __init__(
        self, router: LlmRouter, agent: Agent, settings: Settings, cost_cap: CostCap | None
    ) -> None:
        self._metrics = router.metrics
        self.agent, self.settings, self.cost_cap = agent, settings, cost_cap
        self.spent_usd = 0.0  # what this turn's calls cost so far
        self._read: Callable[[], Any] | None = None  # the fleet's caps, read with a step

    # the recorder's ReadAlong
    def queue(self, conn: Connection) -> Callable[[], Any]:
        """Send the fleet caps' read with a step's writes."""
        return fleet_caps_later(conn)

    def landed(self, read: Callable[[], Any]) -> None:
        """The latest step's read, for the next call."""
        self._read = read

    def next_call(self) -> CallBudget:
        """The caps the turn's next call is held to (its CallInfo.budget)."""
        read, self._read = self._read, None
        stored = None if read is None else read()
        fleet = None if read is None else fleet_caps_of(stored, self.settings)
        cap = self.cost_cap
        if cap is not None:  # the stretch's spend before this turn, and this turn's
            cap = replace(cap, spent_usd=cap.spent_usd + self.spent_usd)
        return CallBudget.of(self.agent, cap, fleet, stored is not None)

    def spent(self, reply: ChatResponse) -> None:
        """Count a call of the turn."""
        self.spent_usd += reply.cost_usd or 0.0

    def release(self, calls: list[CallRecord]) -> None:
        """Hand calls no event named to the router's metrics writer (queued there)."""
        if self._metrics is not None:
            for call in calls:
                self._metrics.record(call)
