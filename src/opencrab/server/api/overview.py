"""Every agent at a glance (the dashboard's home cards, as JSON).

`GET /api/agent-overview` lists every agent, oldest first, with its status (idle, in a
turn, over budget), when its heartbeat ticks next, today's spend against its daily
budget and its counts of skills, sessions and curated memories;
`GET /api/agents/{id}/overview` is one agent's. Both come from
opencrab.core.overview, which the home page renders too.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, FastAPI, Request
from pydantic import Field

from opencrab.core.heartbeat import HeartbeatScheduler, HeartbeatService
from opencrab.core.identity import AgentRole
from opencrab.core.overview import AgentOverview, Status, agent_overview
from opencrab.plugins import hookimpl
from opencrab.prompts import Language
from opencrab.server.deps import AgentId, RuntimeDep
from opencrab.server.schemas import ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Agents"])


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


def heartbeat_scheduler(request: Request) -> HeartbeatScheduler | None:
    """The scheduler ticking this server's agents (None when it runs no heartbeat)."""
    beats: HeartbeatService | None = getattr(request.app.state, "heartbeats", None)
    return None if beats is None else beats.scheduler


@router.get(
    "/agent-overview",
    operation_id="listAgentOverview",
    response_model=list[AgentOverviewResponse],
)
async def list_overview(request: Request, runtime: RuntimeDep) -> list[AgentOverviewResponse]:
    """Every agent at a glance, oldest first: status, spend and counts."""
    cards = await agent_overview(runtime, heartbeat_scheduler(request))
    return [AgentOverviewResponse.of(card) for card in cards]


@router.get(
    "/agents/{id}/overview",
    operation_id="getAgentOverview",
    response_model=AgentOverviewResponse,
    responses=error_responses(400, 404),
)
async def get_overview(
    agent_id: AgentId, request: Request, runtime: RuntimeDep
) -> AgentOverviewResponse:
    """One agent at a glance: status, spend and counts."""
    [card] = await agent_overview(runtime, heartbeat_scheduler(request), agent_id=agent_id)
    return AgentOverviewResponse.of(card)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
