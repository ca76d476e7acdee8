"""Analytics charts' JSON (issue 21 point 1), for the fleet and for one agent.

Fleet routes live under `/api/analytics/...`, one agent's under
`/api/agents/{id}/analytics/...`; one builder and one `_chart` call serve both, with
the same shapes:
- messages: lines spoken per UTC day, one series per agent (memory `speech` logs);
- heartbeats: heartbeat decisions (speak / learn / idle / skip) per day;
- learning: skill versions written per day by kind (created, refined, ...) and the
  reflections run (`reflect_and_learn` actions);
- skills (fleet only, `/api/analytics/skills`; one agent's skill chart is
  `/api/agents/{id}/analytics/skills` in opencrab.server.api.analytics): each skill's
  use and effectiveness summed over the agents;
- relationships: the graph of agents from their impressions (an edge per pair, with
  its affinity, agreement labels and the impressions themselves) and who answered whom
  in discussions.
The builders (opencrab.reports.charts) take a Database and are called by the routes and
the dashboard pages alike; the router is included by opencrab.server.api.analytics.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter

from opencrab.offload import run_blocking
from opencrab.reports.charts import (
    DailySeries,
    FleetSkills,
    Relationships,
    fleet_skills,
    heartbeat_series,
    learning_series,
    messages_series,
    relationships,
)
from opencrab.server.deps import AgentDep, DatabaseDep
from opencrab.server.schemas import ApiModel, Period, error_responses
from opencrab.store.database import Database

router = APIRouter(prefix="/api", tags=["Analytics"])


def _chart(
    name: str,
    build: Callable[[Database, str | None, str], ApiModel],
    model: type[ApiModel],
    *,
    operation: str,
    fleet_doc: str,
    agent_doc: str,
    default: str = "month",
) -> None:
    """Serve one chart twice from its builder: the fleet's at `/api/analytics/<name>`
    (operation id `getFleet<operation>`) and one agent's at
    `/api/agents/{id}/analytics/<name>` (`get<operation>`)."""

    async def for_fleet(db: DatabaseDep, period: Period = default) -> ApiModel:
        return await run_blocking(build, db, None, period)

    async def for_agent(agent: AgentDep, db: DatabaseDep, period: Period = default) -> ApiModel:
        return await run_blocking(build, db, agent.id, period)

    routes = (
        ("fleet", f"/analytics/{name}", for_fleet, f"getFleet{operation}", fleet_doc, (400,)),
        (
            "agent",
            f"/agents/{{id}}/analytics/{name}",
            for_agent,
            f"get{operation}",
            agent_doc,
            (400, 404),
        ),
    )
    for whose, path, endpoint, op_id, doc, errors in routes:
        router.add_api_route(
            path,
            endpoint,
            methods=["GET"],
            name=f"get_{whose}_{name}",  # the summary: "Get Fleet Messages", ...
            operation_id=op_id,
            response_model=model,
            responses=error_responses(*errors),
            description=doc,
        )


_chart(
    "messages",
    messages_series,
    DailySeries,
    operation="MessageAnalytics",
    fleet_doc="Lines each agent spoke, per UTC day.",
    agent_doc="Lines the agent spoke, per UTC day.",
)
_chart(
    "heartbeats",
    heartbeat_series,
    DailySeries,
    operation="HeartbeatAnalytics",
    fleet_doc="Heartbeat decisions of every agent (speak / learn / idle / skip), per UTC day.",
    agent_doc="The agent's heartbeat decisions (speak / learn / idle / skip), per UTC day.",
)
_chart(
    "learning",
    learning_series,
    DailySeries,
    operation="LearningAnalytics",
    fleet_doc="Skills written per UTC day by kind of change, and reflections run.",
    agent_doc="The agent's skills written per UTC day by kind of change, and reflections run.",
)


@router.get(
    "/analytics/skills",
    operation_id="getFleetSkillAnalytics",
    response_model=FleetSkills,
    responses=error_responses(400),
)
async def get_fleet_skills(db: DatabaseDep, period: Period = "month") -> FleetSkills:
    """Each skill's use and mean effectiveness over the agents that have it."""
    return await run_blocking(fleet_skills, db, period)


_chart(
    "relationships",
    relationships,
    Relationships,
    operation="Relationships",
    fleet_doc="The agents' graph from their impressions, and who answered whom in discussions.",
    agent_doc="The agent's relations from impressions either way, and its discussion exchanges.",
    default="all",
)
