"""FastAPI dependencies, as `Annotated` aliases routers can put in their signatures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends, Path, Request

from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentStore
from opencrab.core.heartbeat import HeartbeatScheduler, HeartbeatService
from opencrab.core.runtime import Runtime
from opencrab.errors import NotFoundError
from opencrab.event_log import EventLog
from opencrab.store import Database


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


async def get_event_log(request: Request) -> EventLog:
    log: EventLog = request.app.state.event_log
    return log


async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def heartbeat_scheduler(request: Request) -> HeartbeatScheduler | None:
    """The scheduler ticking this server's agents (None when it runs no heartbeat)."""
    beats: HeartbeatService | None = getattr(request.app.state, "heartbeats", None)
    return None if beats is None else beats.scheduler


async def get_agents(request: Request) -> AgentStore:
    runtime: Runtime = request.app.state.runtime
    return runtime.agents


def actor_of(request: Request) -> str:
    """Who makes a change: the API token's name, or "local" (loopback without tokens).

    Deciders and audit actors come from here, never from a request body.
    """
    token = getattr(request.state, "api_token", None)
    return str(token.name) if token is not None else "local"


AGENT_REF = "The agent's id or its name (a name is never UUID-shaped, so they never clash)."
"""How the API describes an agent reference, in a path, a query or a body."""

AgentId = Annotated[str, Path(alias="id", description=AGENT_REF)]
"""An agent in the path: a reference that names no agent (too long, empty, anything) is
404, the status seed 002 documents for its `/api/agents/{id}` operations."""


def record_id(what: str) -> Callable[..., Any]:
    """A dependency reading the path's `id` as the UUID of a `what`: anything that is no
    UUID names no such record, so it is 404 (seed 002 documents 404, never 400, for
    `/api/tickets/{id}`, `/api/sessions/{id}` and `/api/tools/{id}`).

    Example:
        TicketId = Annotated[UUID, Depends(record_id("ticket"))]
    """

    async def parse(value: str) -> UUID:
        try:
            return UUID(value)
        except ValueError:
            raise NotFoundError(f"no {what} {value[:100]!r}") from None

    # set here, not written in the signature: a string annotation could not see `what`
    path = Path(alias="id", description=f"The {what}'s id.", json_schema_extra={"format": "uuid"})
    parse.__annotations__ = {"value": Annotated[str, path], "return": UUID}
    return parse


async def get_agent(agent_id: AgentId, request: Request) -> Agent:
    """The agent named in the path by id or name (404 when there is none).

    Dependencies here are `async`: they only read app state or do a short SQLite read
    (WAL readers never wait), which costs less on the event loop than a thread hop.
    """
    agents: AgentStore = request.app.state.runtime.agents
    return agents.get(agent_id)


AgentDep = Annotated[Agent, Depends(get_agent)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
AgentStoreDep = Annotated[AgentStore, Depends(get_agents)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_db)]
EventLogDep = Annotated[EventLog, Depends(get_event_log)]
