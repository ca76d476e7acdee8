"""Every agent at a glance, as `GET /api/agent-overview` answers: the cards of
opencrab.core.overview (which the home page renders) in the API's shape."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import Field

from opencrab.core.heartbeat import HeartbeatScheduler
from opencrab.core.identity import AgentRole
from opencrab.core.overview import AgentOverview, Status, agent_overview
from opencrab.core.runtime import Runtime
from opencrab.prompts import Language
from opencrab.reports.model import ApiModel


class HeartbeatStatus(ApiModel):
    enabled: bool
    interval_secs: int
    next_tick_secs: float | None = Field(
        description="Seconds until its next tick; null when off or not ticking in this server."
    )


class AgentOverviewResponse(ApiModel):
    id: UUID
    name: str
    description: str | None = None
    language: Language
    role: AgentRole
    job_title: str | None = None
    organization: str | None = None
    image_url: str | None = None
    persona: str = Field(description="The persona in one line: styles and its marked trait.")
    status: Status = Field(
        description="in_turn while a turn runs; else over_budget when a cap that refuses "
        "its calls is spent (its daily or monthly budget, the fleet's daily or monthly "
        "cap); else error when its latest turn of the last 24 hours failed (no reply "
        "since); else idle."
    )
    turns_running: int
    turn_since: datetime | None = None
    heartbeat: HeartbeatStatus
    spent_today_usd: float = Field(description="Spent on LLM calls since 00:00 UTC.")
    daily_budget_usd: float | None = None
    budget_spent: str | None = Field(
        default=None,
        description="The spent cap that stops it: daily budget, monthly budget, "
        "fleet daily cap or fleet monthly cap (null: none).",
    )
    skill_count: int = Field(description="Skills switched on.")
    session_count: int
    memory_count: int = Field(description="Curated memories.")

    @classmethod
    def of(cls, card: AgentOverview) -> AgentOverviewResponse:
        return cls(
            id=UUID(card.id),
            name=card.name,
            description=card.description,
            language=card.language,
            role=card.role,
            job_title=card.job_title,
            organization=card.organization,
            image_url=card.image_url,
            persona=card.persona,
            status=card.status,
            turns_running=card.turns_running,
            turn_since=card.turn_since,
            heartbeat=HeartbeatStatus(
                enabled=card.heartbeat_enabled,
                interval_secs=card.heartbeat_interval_secs,
                next_tick_secs=card.next_heartbeat_secs,
            ),
            spent_today_usd=card.spent_today_usd,
            daily_budget_usd=card.daily_budget_usd,
            budget_spent=card.budget_spent,
            skill_count=card.skills,
            session_count=card.sessions,
            memory_count=card.memories,
        )


async def agent_overviews(
    runtime: Runtime, scheduler: HeartbeatScheduler | None, *, agent_id: str | None = None
) -> list[AgentOverviewResponse]:
    """Every agent's card, oldest first (or `agent_id`'s alone), as the API shows it."""
    cards = await agent_overview(runtime, scheduler, agent_id=agent_id)
    return [AgentOverviewResponse.of(card) for card in cards]
