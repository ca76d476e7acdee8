"""Agents (seed 002 `/api/agents`, seed 001 soul and identity routes).

Seed 002's shapes: `AgentSummary` in lists, `AgentResponse` for one agent (an agent
without a description has no `description` key: the seed types it as a string, never
null), `CreateAgentRequest` / `UpdateAgentRequest` with `toolIds`. An agent is addressed
by id or name; a path that names none is 404, whatever it holds, and a name another agent
has is 400 `name_taken` (the seed's statuses). Creating accepts the seed-001
parts too (soul, identity, llm, heartbeat), updating soul, identity and heartbeat (so a
persona editor saves everything at once); soul, identity and heartbeat also have their
own GET/PUT routes.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import orjson
from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import Field

from opencrab.core.agent import (
    MAX_NAME,
    MAX_PROMPT_CHARS,
    Agent,
    AgentCreate,
    AgentStore,
    AgentUpdate,
    HeartbeatConfig,
)
from opencrab.core.identity import Identity
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.soul import Soul
from opencrab.errors import ValidationError
from opencrab.plugins import hookimpl
from opencrab.prompts import Language
from opencrab.server.deps import AgentId, AgentStoreDep
from opencrab.server.routing import answered_directly
from opencrab.server.schemas import ApiInput, ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Agents"])


NO_DESCRIPTION = "Left out when the agent has none (seed 002 types it as a string)."


class AgentSummary(ApiModel):
    id: UUID
    name: str
    description: str | None = Field(default=None, description=NO_DESCRIPTION)


class AgentResponse(ApiModel):
    id: UUID
    name: str
    description: str | None = Field(default=None, description=NO_DESCRIPTION)
    prompt: str
    language: Language = Field(description="Language of its prompts and standard skills.")
    tool_ids: list[UUID]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, agent: Agent) -> AgentResponse:
        return cls(
            id=UUID(agent.id),
            name=agent.name,
            description=agent.description,
            prompt=agent.prompt,
            language=agent.language,
            tool_ids=[UUID(t) for t in agent.tool_ids],
            created_at=agent.created_at,
            updated_at=agent.updated_at,
        )


class CreateAgentRequest(ApiInput):
    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str | None = Field(default=None, max_length=10_000)
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    language: Language | None = Field(
        default=None, description="en, ja or zh; left out, the server's [agent] language."
    )
    tool_ids: list[UUID] | None = None
    soul: Soul | None = None
    identity: Identity | None = None
    llm: AgentLlmConfig | None = None
    heartbeat: HeartbeatConfig | None = None


class UpdateAgentRequest(ApiInput):
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    description: str | None = Field(default=None, max_length=10_000)
    prompt: str | None = Field(default=None, min_length=1, max_length=MAX_PROMPT_CHARS)
    language: Language | None = Field(default=None, description="en, ja or zh.")
    tool_ids: list[UUID] | None = None
    heartbeat: HeartbeatConfig | None = None
    soul: Soul | None = Field(default=None, description="Replaces the persona.")
    identity: Identity | None = Field(default=None, description="Replaces the identity.")


def _spec(
    body: ApiInput, model: type[AgentCreate] | type[AgentUpdate]
) -> AgentCreate | AgentUpdate:
    """The store's input; the name rules (no control characters, not a UUID) give 400."""
    values = body.model_dump(exclude_none=True)
    if "tool_ids" in values:
        values["tool_ids"] = [str(t) for t in values["tool_ids"]]
    try:
        return model.model_validate(values)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ValidationError(_first_error(exc)) from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        found = errors()
        if found:
            where = ".".join(str(p) for p in found[0].get("loc", ()))
            return f"{where}: {found[0].get('msg', 'invalid')}"
    return str(exc)


@router.get(
    "/agents",
    operation_id="listAgents",
    response_model=list[AgentSummary],
    response_model_exclude_none=True,
)
@answered_directly
async def list_agents(request: Request) -> Response:
    """Every agent, oldest first."""
    # one short SQLite read (WAL: readers never wait): cheaper on the loop than a thread hop
    agents: AgentStore = request.app.state.runtime.agents
    return Response(summaries_json(agents.summaries()), media_type="application/json")


def summaries_json(summaries: list[tuple[str, str, str | None]]) -> bytes:
    """What FastAPI would send for these as `list[AgentSummary]` without None fields,
    byte for byte, written straight from the rows: the list is read far more often than
    anything else (every page's agent picker), and building and validating a model per
    agent cost more than the read. Agent ids are canonical UUID strings (AgentStore
    writes str(uuid4()), the repository reads them back with str())."""
    return orjson.dumps(
        [
            {"id": id_, "name": name}
            if description is None
            else {"id": id_, "name": name, "description": description}
            for id_, name, description in summaries
        ]
    )


@router.post(
    "/agents",
    operation_id="createAgent",
    status_code=201,
    response_model=AgentResponse,
    response_model_exclude_none=True,
    responses=error_responses(400),
)
def create_agent(
    body: CreateAgentRequest, agents: AgentStoreDep, request: Request
) -> AgentResponse:
    """Create an agent (its persona, identity and LLM settings default when left out)."""
    spec = _spec(body, AgentCreate)
    assert isinstance(spec, AgentCreate)
    agent = agents.create(spec)
    _heartbeat_follows(request, agent)
    return AgentResponse.of(agent)


@router.get(
    "/agents/{id}",
    operation_id="getAgent",
    response_model=AgentResponse,
    response_model_exclude_none=True,
    responses=error_responses(404),
)
def get_agent(agent_id: AgentId, agents: AgentStoreDep) -> AgentResponse:
    """One agent."""
    return AgentResponse.of(agents.get(agent_id))


@router.put(
    "/agents/{id}",
    operation_id="updateAgent",
    response_model=AgentResponse,
    response_model_exclude_none=True,
    responses=error_responses(400, 404),
)
def update_agent(
    agent_id: AgentId, body: UpdateAgentRequest, agents: AgentStoreDep, request: Request
) -> AgentResponse:
    """Change the fields given, in one transaction; `toolIds` replaces the granted tools,
    `soul` and `identity` replace the persona and the identity."""
    change = _spec(body, AgentUpdate)
    assert isinstance(change, AgentUpdate)
    agent = agents.update(agent_id, change)
    if body.heartbeat is not None:
        _heartbeat_follows(request, agent)
    return AgentResponse.of(agent)


@router.delete(
    "/agents/{id}",
    operation_id="deleteAgent",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 404, 409),
)
def delete_agent(agent_id: AgentId, agents: AgentStoreDep, request: Request) -> Response:
    """Delete the agent with its memory, skills and sessions (its workspace stays on disk);
    409 while it has tickets."""
    agent = agents.delete(agent_id)
    beats = getattr(request.app.state, "heartbeats", None)
    if beats is not None:
        beats.forget(agent.id)
    return Response(status_code=204)


# ------------------------------------------------------------------ soul and identity
@router.get(
    "/agents/{id}/soul",
    operation_id="getSoul",
    response_model=Soul,
    responses=error_responses(400, 404),
)
def get_soul(agent_id: AgentId, agents: AgentStoreDep) -> Soul:
    """The agent's persona: social style, Big Five, thinking style, custom traits."""
    return agents.get(agent_id).soul


@router.put(
    "/agents/{id}/soul",
    operation_id="updateSoul",
    response_model=Soul,
    responses=error_responses(400, 404),
)
def update_soul(agent_id: AgentId, body: Soul, agents: AgentStoreDep) -> Soul:
    """Replace the persona."""
    agent = agents.update(agent_id, AgentUpdate(soul=body))
    return agent.soul


@router.get(
    "/agents/{id}/identity",
    operation_id="getIdentity",
    response_model=Identity,
    responses=error_responses(400, 404),
)
def get_identity(agent_id: AgentId, agents: AgentStoreDep) -> Identity:
    """Who the agent is: name, role, job title, organisation, image."""
    return agents.get(agent_id).identity


@router.put(
    "/agents/{id}/identity",
    operation_id="updateIdentity",
    response_model=Identity,
    responses=error_responses(400, 404),
)
def update_identity(agent_id: AgentId, body: Identity, agents: AgentStoreDep) -> Identity:
    """Replace the identity."""
    agent = agents.update(agent_id, AgentUpdate(identity=body))
    return agent.identity


@router.get(
    "/agents/{id}/heartbeat",
    operation_id="getHeartbeat",
    response_model=HeartbeatConfig,
    responses=error_responses(400, 404),
)
def get_heartbeat(agent_id: AgentId, agents: AgentStoreDep) -> HeartbeatConfig:
    """The agent's heartbeat: interval, on or off, and its home conversation."""
    return agents.get(agent_id).heartbeat


@router.put(
    "/agents/{id}/heartbeat",
    operation_id="updateHeartbeat",
    response_model=HeartbeatConfig,
    responses=error_responses(400, 404),
)
def update_heartbeat(
    agent_id: AgentId, body: HeartbeatConfig, agents: AgentStoreDep, request: Request
) -> HeartbeatConfig:
    """Replace the heartbeat config; the running heartbeat follows it at once."""
    agent = agents.update(agent_id, AgentUpdate(heartbeat=body))
    _heartbeat_follows(request, agent)
    return agent.heartbeat


def _heartbeat_follows(request: Request, agent: Agent) -> None:
    beats = getattr(request.app.state, "heartbeats", None)
    if beats is not None:
        beats.follow(agent)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
