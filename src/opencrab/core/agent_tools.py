"""An agent's tools by name: which are granted, switched on, and which wait for a person.

Three settings decide what an agent does with a tool: its grant (`agent_tools`, seed
002's `toolIds`: the model is offered the tool), for execute_command, http_request and
fetch_webpage a switch (opencrab.actions.tool_settings: off until switched on), and its
approval policy (`never`, `always`, `unsafe`: core/approvals.py). Here they are read and
set together, per tool name — what the agent page's Tools tab and
`GET/PUT /api/agents/{id}/tools[/{name}]` use. An unknown name is a NotFoundError naming it.
A tool its source does not offer now (core/tool_sources.py) is listed only where it is
granted, as not offered: the grant stays, the tool is not callable until it comes back.

Example:
    set_agent_tool(db, agents, registry, agent, "execute_command", granted=True,
                   enabled=True, approval="always")
    [t.name for t in agent_tools(db, registry, agents.get(agent.id)) if t.granted]
"""

from __future__ import annotations

from dataclasses import dataclass

from opencrab.actions.base import ActionRegistry
from opencrab.actions.tool_settings import ApprovalPolicy, load_tool_settings, save_tool_settings
from opencrab.core.agent import Agent, AgentStore, AgentUpdate
from opencrab.errors import NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.repositories import tools as repo

SWITCHED = ("execute_command", "http_request", "fetch_webpage")
"""Tools that also need their switch on (ToolSettings' fields of the same names)."""


@dataclass(frozen=True)
class AgentTool:
    """One tool as one agent has it."""

    name: str
    tool_id: str
    description: str | None
    granted: bool
    enabled: bool | None  # the switch of a switched tool; None: the tool has none
    approval: ApprovalPolicy
    offered: bool = True  # False: its source does not offer it now; not callable till it does


def agent_tools(db: Database, registry: ActionRegistry, agent: Agent) -> list[AgentTool]:
    """Every tool offered now, and every granted one that is not, by name, with the
    agent's grant, switch and approval policy."""
    with db.read() as conn:
        rows = repo.all_tools(conn)
    settings = load_tool_settings(db, agent.id)
    granted = set(agent.tool_ids)
    return [
        AgentTool(
            name=row.name,
            tool_id=row.id,
            description=row.description,
            granted=row.id in granted,
            enabled=bool(getattr(settings, row.name)) if row.name in SWITCHED else None,
            approval=settings.approval_policy(row.name),
            offered=row.name in registry,
        )
        for row in rows
        if row.name in registry or row.id in granted
    ]


def agent_tool(db: Database, registry: ActionRegistry, agent: Agent, name: str) -> AgentTool:
    """The agent's tool `name` (NotFoundError naming it when there is no such tool)."""
    for tool in agent_tools(db, registry, agent):
        if tool.name == name:
            return tool
    raise NotFoundError(f"no tool named {name!r} (GET /api/tools lists them)")


def set_agent_tool(
    db: Database,
    agents: AgentStore,
    registry: ActionRegistry,
    agent: Agent,
    name: str,
    *,
    granted: bool | None = None,
    enabled: bool | None = None,
    approval: ApprovalPolicy | None = None,
) -> AgentTool:
    """Grant or revoke the tool, switch it, set its approval policy (None: kept)."""
    tool = agent_tool(db, registry, agent, name)  # NotFoundError first: nothing changed
    if enabled is not None and tool.enabled is None:
        raise ValidationError(
            f"{name} has no switch: only {', '.join(SWITCHED)} are switched on and off"
        )
    if granted is not None and granted != tool.granted:
        ids = [t for t in agent.tool_ids if t != tool.tool_id]
        agent = agents.update(
            agent.id, AgentUpdate(tool_ids=[*ids, tool.tool_id] if granted else ids)
        )
    if enabled is not None or approval is not None:
        settings = load_tool_settings(db, agent.id)
        if enabled is not None:
            setattr(settings, name, enabled)
        if approval is not None:
            rules = {k: v for k, v in settings.approvals.items() if k != name}
            settings.approvals = rules if approval == "never" else {**rules, name: approval}
        save_tool_settings(db, agent.id, settings)
    return agent_tool(db, registry, agents.get(agent.id), name)
