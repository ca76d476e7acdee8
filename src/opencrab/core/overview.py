"""Every agent at a glance: who it is, what it is doing, what it spent, what it has.

One service for the dashboard's home cards and `GET /api/agent-overview`, so both show
the same thing. It reads the store with a few grouped queries whatever the number of
agents (the agents with their persona, today's spend, and counts of skills, sessions
and curated memories: store/repositories/agent_stats.py and skills.py), and joins what
only this process knows: which agents are in a turn now (the engine's RunningTurns) and
when each one's heartbeat ticks next (the scheduler, when this process runs one).

Status: `in_turn` while a turn runs, else `over_budget` once a cap that refuses the
agent's calls is spent (its daily or monthly budget, the fleet's daily or monthly cap:
core/budgets.Standing, as the check before a call counts them), else `error` when its
latest turn of the last `ERROR_HOURS` failed (an error ended it, no reply since), else
`idle`.

Example:
    cards = await agent_overview(runtime, scheduler)     # every agent, oldest first
    [one] = await agent_overview(runtime, scheduler, agent_id="aki")
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from opencrab.core.agent import Agent
from opencrab.core.budgets import Budgets, Standing
from opencrab.core.heartbeat import HeartbeatScheduler
from opencrab.core.identity import AgentRole
from opencrab.core.runtime import Runtime
from opencrab.offload import run_blocking
from opencrab.prompts import Language
from opencrab.store.repositories import agent_stats
from opencrab.store.repositories.skills import skill_counts

Status = Literal["idle", "in_turn", "over_budget", "error"]
ERROR_HOURS = 24
"""How far back a failed turn makes an agent's status `error` (a reply since clears it)."""
TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
MARKED_TRAIT = 0.2
"""How far from the middle (0.5) a Big Five trait must be to be named in the persona line."""


@dataclass(frozen=True)
class AgentOverview:
    """One agent's card: identity, persona in a line, status, spend and counts."""

    id: str
    name: str
    description: str | None
    language: Language
    role: AgentRole
    job_title: str | None
    organization: str | None
    image_url: str | None
    persona: str
    status: Status
    turns_running: int
    turn_since: datetime | None
    heartbeat_enabled: bool
    heartbeat_interval_secs: int
    next_heartbeat_secs: float | None  # None: off, or no scheduler in this process
    spent_today_usd: float
    daily_budget_usd: float | None
    over_budget: bool
    budget_spent: str | None  # the spent cap that stops it ("monthly budget", ...)
    skills: int
    sessions: int
    memories: int


@dataclass(frozen=True)
class _Stored:
    agents: list[Agent]
    spent: dict[str, float]
    standing: Standing
    skills: dict[str, int]
    sessions: dict[str, int]
    memories: dict[str, int]
    failing: set[str]


async def agent_overview(
    runtime: Runtime, scheduler: HeartbeatScheduler | None, *, agent_id: str | None = None
) -> list[AgentOverview]:
    """Every agent's overview, oldest first; only `agent_id`'s (id or name) when given."""
    if runtime.router.metrics is not None:
        await runtime.router.metrics.flush()  # calls just made count in today's spend
    stored = await run_blocking(_read, runtime, agent_id)
    running = runtime.engine.running.by_agent()  # in-memory state: read on the loop
    ticks = scheduler.next_ticks() if scheduler is not None else {}
    cards = []
    for agent in stored.agents:
        turns = running.get(agent.id)
        spent = stored.spent.get(agent.id, 0.0)
        budget = agent.llm_config.daily_budget_usd
        caps = (budget, agent.llm_config.monthly_budget_usd)
        stopped = stored.standing.stopped(agent.id, caps)
        over = stopped is not None
        status: Status = (
            "in_turn"
            if turns is not None
            else "over_budget"
            if over
            else "error"
            if agent.id in stored.failing
            else "idle"
        )
        beat = agent.heartbeat
        cards.append(
            AgentOverview(
                id=agent.id,
                name=agent.name,
                description=agent.description,
                language=agent.language,
                role=agent.identity.role,
                job_title=agent.identity.job_title,
                organization=agent.identity.organization,
                image_url=agent.identity.image_url,
                persona=persona_line(agent),
                status=status,
                turns_running=0 if turns is None else turns.count,
                turn_since=None if turns is None else turns.since,
                heartbeat_enabled=beat.enabled,
                heartbeat_interval_secs=beat.interval_secs,
                next_heartbeat_secs=ticks.get(agent.id) if beat.enabled else None,
                spent_today_usd=spent,
                daily_budget_usd=budget,
                over_budget=over,
                budget_spent=stopped,
                skills=stored.skills.get(agent.id, 0),
                sessions=stored.sessions.get(agent.id, 0),
                memories=stored.memories.get(agent.id, 0),
            )
        )
    return cards


def persona_line(agent: Agent) -> str:
    """The persona in one line: its name (when not the agent's), social and thinking
    style, and its most marked Big Five trait."""
    soul = agent.soul
    parts = []
    if soul.persona_name.strip() and soul.persona_name != agent.name:
        parts.append(soul.persona_name)
    parts.append(soul.social_style.style_name)
    thinking = soul.thinking_style
    leanings = " / ".join(s for s in (thinking.primary, thinking.secondary) if s.strip())
    if leanings:
        parts.append(leanings)
    traits = soul.personality.model_dump()
    trait = max(TRAITS, key=lambda t: abs(traits[t] - 0.5))
    if abs(traits[trait] - 0.5) >= MARKED_TRAIT:
        parts.append(("high " if traits[trait] > 0.5 else "low ") + trait)
    return " · ".join(parts)


def _read(runtime: Runtime, agent_id: str | None) -> _Stored:
    """The stored part, in one read transaction: a fixed number of queries."""
    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    standing = Budgets(runtime.db, runtime.settings).standing()
    with runtime.db.read() as conn:
        agents = runtime.agents.list() if agent_id is None else [runtime.agents.get(agent_id)]
        ids = None if agent_id is None else [a.id for a in agents]
        return _Stored(
            agents=agents,
            spent=agent_stats.spent_by_agent(conn, midnight, ids),
            standing=standing,
            skills=_skill_counts(skill_counts(conn, ids), agents, runtime),
            sessions=agent_stats.session_counts(conn, ids),
            memories=agent_stats.memory_counts(conn, ids),
            failing=agent_stats.failing_agents(conn, now - timedelta(hours=ERROR_HOURS), ids),
        )


def _skill_counts(
    found: dict[str, tuple[int, int]], agents: Iterable[Agent], runtime: Runtime
) -> dict[str, int]:
    """Skills switched on; an agent whose standard skills were never copied in (no turn
    yet, skills page never opened) has them all on, as it will once they are."""
    counts = {}
    for agent in agents:
        on, standard = found.get(agent.id, (0, 0))
        if standard == 0:
            on += len(runtime.skill_docs.get(agent.language, ()))
        counts[agent.id] = on
    return counts
