"""FastAPI dependencies, as `Annotated` aliases routers can put in their signatures."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from opencrab.config import Settings
from opencrab.core.agent import MAX_NAME, Agent, AgentStore
from opencrab.core.runtime import Runtime
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

AgentId = Annotated[
    str,
    Path(alias="id", min_length=1, max_length=MAX_NAME, description=AGENT_REF),
]


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
