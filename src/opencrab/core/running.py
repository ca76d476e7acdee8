"""Which agents are in a turn right now, in this process, and since when.

The engine enters every turn here (SkillEngine.run), whoever started it: a chat on any
gateway, a discussion, the heartbeat. The dashboard's cards and
`GET /api/agent-overview` read it to show "in a turn".

Example:
    running = RunningTurns()
    with running.turn(agent.id, session_id):
        ...                                    # running.by_agent()[agent.id].count == 1
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class AgentTurns:
    """An agent's running turns: how many, since when (the oldest), in which sessions."""

    count: int
    since: datetime
    session_ids: tuple[str, ...]


class RunningTurns:
    """The turns in progress, by agent (an in-memory register; the event loop's own)."""

    def __init__(self) -> None:
        self._turns: dict[int, tuple[str, str, datetime]] = {}
        self._ids = itertools.count(1)

    @contextmanager
    def turn(self, agent_id: str, session_id: str) -> Iterator[None]:
        """Count the agent as in a turn until the block ends, however it ends."""
        key = next(self._ids)
        self._turns[key] = (agent_id, session_id, datetime.now(UTC))
        try:
            yield
        finally:
            del self._turns[key]

    def by_agent(self) -> dict[str, AgentTurns]:
        """Every agent in a turn now, with its running turns."""
        found: dict[str, list[tuple[str, datetime]]] = {}
        for agent_id, session_id, since in list(self._turns.values()):
            found.setdefault(agent_id, []).append((session_id, since))
        return {
            agent_id: AgentTurns(
                count=len(turns),
                since=min(since for _, since in turns),
                session_ids=tuple(dict.fromkeys(session for session, _ in turns)),
            )
            for agent_id, turns in found.items()
        }
