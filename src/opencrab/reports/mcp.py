"""The MCP page and `/api/mcp/...`: the MCP servers whose tools agents use, as this
process runs them, with their tools, which agents are granted them, and a test call.

A server is the config file's (`[mcp.servers.<name>]`, read-only here: its env and
header values are not shown, they may hold tokens) or the dashboard's
(opencrab.mcp.client.stored: editable; its secrets shown only by their last four
characters). Its status is its tool source's in this process (`McpServerSource.status`:
running, starting, failed, restarting, stopped, with the last error and the restarts),
or why it is not started here (`problem`: its name is the config's, its secrets cannot
be decrypted). Every error text shown passes through the router's redactor.

Enabling a server for an agent is granting it the server's tools, the grants of
core/agent_tools.py (`agent_tools`): what the agent's Tools tab shows, tool by tool.

A test call (`call_tool`) checks the arguments against the tool's input schema and calls
it through the same registry entry and MCP session as an agent's call, with the same
result (text, structured content, described images, isError as a failure) and the same
cap. It is an operator's call, made by the person who would decide an approval, so no
approval is asked for (the page says so); it is logged with who made it, never with its
arguments. A secret the result echoes (a server's own token) is shown redacted.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from opencrab.actions.base import SEPARATOR, ActionCallError, nested_too_deep
from opencrab.config.mcp import McpServerConfig
from opencrab.core.agent import AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.errors import NotFoundError, ValidationError
from opencrab.mcp.client.source import McpServerSource
from opencrab.mcp.client.stored import StoredMcpServers, server_name
from opencrab.mcp.client.tools import McpTool
from opencrab.reports.model import ApiModel
from opencrab.store.repositories import mcp_servers as repo
from opencrab.store.repositories import tools as tools_repo

log = logging.getLogger(__name__)

HIDDEN = "••••"


class McpToolView(ApiModel):
    name: str
    full_name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    read_only: bool


class McpAgentGrant(ApiModel):
    agent_id: str
    agent_name: str
    granted: int
    tools: int
    enabled: bool


class McpSecretsShown(ApiModel):
    """A dashboard server's secrets as shown: the last four characters of each ("" for
    a secret too short to show any), never the value; bearer_token None: it has none."""

    bearer_token: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)


class McpServerView(ApiModel):
    name: str
    origin: Literal["config", "dashboard"]
    transport: Literal["stdio", "http"]
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    read_paths: list[str] = Field(default_factory=list)
    network: bool = False
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    allow_private: bool = False
    call_timeout_secs: float
    start_timeout_secs: float
    secrets: McpSecretsShown = Field(default_factory=McpSecretsShown)
    state: str
    last_error: str | None = None
    restarts: int = 0
    sandbox: str | None = None
    problem: str | None = None
    tools: list[McpToolView] = Field(default_factory=list)
    agents: list[McpAgentGrant] = Field(default_factory=list)
    updated_by: str | None = None
    updated_at: datetime | None = None


class McpCallResult(ApiModel):
    success: bool
    text: str | None = None
    structured: Any = None
    content: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None


def _stored(stored: StoredMcpServers | None) -> StoredMcpServers:
    if stored is None:
        raise NotFoundError("this process runs no MCP servers (its tool sources are not started)")
    return stored


def servers_view(runtime: Runtime, stored: StoredMcpServers | None) -> list[McpServerView]:
    """Every MCP server, the config's first, each with its status, tools and grants."""
    running = _stored(stored)
    with runtime.db.read() as conn:
        rows = repo.servers(conn)
        tool_rows = tools_repo.all_tools(conn)
    agents = runtime.agents.list()
    ids = {row.name: row.id for row in tool_rows}
    redact = runtime.router.redactor.redact
    views: list[McpServerView] = []
    for name, config in sorted(runtime.settings.mcp.servers.items()):
        source = running.source(name)
        view = _view(name, "config", config, source, redact)
        view.env = dict.fromkeys(config.env, HIDDEN)
        view.headers = dict.fromkeys(config.headers, HIDDEN)
        if source is None:
            view.problem = "not started in this process"
        views.append(view)
    for name, row in rows.items():
        source = running.running.get(name, (0, None))[1]
        table = {**row.config}
        config = McpServerConfig.model_construct(**table)
        view = _view(name, "dashboard", config, source, redact)
        view.secrets = McpSecretsShown.model_validate(row.secrets_shown)
        view.updated_by, view.updated_at = row.updated_by, row.updated_at
        problem = running.problems.get(name)
        if problem is not None:
            view.problem = redact(problem)
            view.state = "failed" if name not in runtime.settings.mcp.servers else "shadowed"
        views.append(view)
    for view in views:
        full = [t.full_name for t in view.tools]
        view.agents = [
            McpAgentGrant(
                agent_id=str(agent.id),
                agent_name=agent.name,
                granted=sum(1 for n in full if ids.get(n) in agent.tool_ids),
                tools=len(full),
                enabled=bool(full) and all(ids.get(n) in agent.tool_ids for n in full),
            )
            for agent in agents
        ]
    return views


def _view(
    name: str,
    origin: Literal["config", "dashboard"],
    config: McpServerConfig,
    source: McpServerSource | None,
    redact: Any,
) -> McpServerView:
    stdio = bool(config.command)
    view = McpServerView(
        name=name,
        origin=origin,
        transport="stdio" if stdio else "http",
        command=config.command,
        args=list(config.args),
        env=dict(config.env),
        read_paths=list(config.read_paths),
        network=config.network,
        url=config.url,
        headers=dict(config.headers),
        allow_private=config.allow_private,
        call_timeout_secs=config.call_timeout_secs,
        start_timeout_secs=config.start_timeout_secs,
        state="stopped",
    )
    if source is None:
        return view
    status = source.status()
    view.state = status["state"]
    view.last_error = redact(status["last_error"]) if status["last_error"] else None
    view.restarts = status["restarts"]
    view.sandbox = status["sandbox"]
    view.tools = [
        McpToolView(
            name=action.tool_name,
            full_name=source.full_name(action.tool_name),
            description=action.text,
            input_schema=action.schema,
            annotations=action.annotations,
            read_only=action.read_only,
        )
        for action in sorted(source.actions(), key=lambda a: a.definition().name)
        if isinstance(action, McpTool)
    ]
    return view


def server_view(runtime: Runtime, stored: StoredMcpServers | None, name: str) -> McpServerView:
    """One server as `servers_view` shows it (NotFoundError naming it)."""
    for view in servers_view(runtime, stored):
        if view.name == name and not (view.origin == "dashboard" and view.state == "shadowed"):
            return view
    raise NotFoundError(f"no MCP server {name!r} (GET /api/mcp/servers lists them)")


def set_server_grant(
    runtime: Runtime, stored: StoredMcpServers | None, name: str, agent_ref: str, enabled: bool
) -> McpServerView:
    """Grant the agent every tool the server offers now (`enabled`), or revoke every tool
    of the server it holds (offered now or not)."""
    server_name(name)
    view = server_view(runtime, stored, name)
    agent = runtime.agents.get(agent_ref)
    prefix = f"mcp{SEPARATOR}{name}{SEPARATOR}"
    with runtime.db.read() as conn:
        rows = tools_repo.all_tools(conn)
    if enabled:
        offered = {t.full_name for t in view.tools}
        if not offered:
            raise ValidationError(
                f"MCP server {name!r} offers no tools now ({view.state}); nothing to grant"
            )
        wanted = [r.id for r in rows if r.name in offered and r.id not in agent.tool_ids]
        ids = [*agent.tool_ids, *wanted]
    else:
        theirs = {r.id for r in rows if r.name.startswith(prefix)}
        ids = [t for t in agent.tool_ids if t not in theirs]
    if ids != list(agent.tool_ids):
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=ids))
    return server_view(runtime, stored, name)


async def call_tool(
    runtime: Runtime,
    stored: StoredMcpServers | None,
    name: str,
    tool: str,
    arguments: Any,
    *,
    actor: str,
) -> McpCallResult:
    """Call the server's tool as an operator's test (see the module docstring)."""
    server_name(name)
    source = _stored(stored).source(name)
    if source is None:
        raise NotFoundError(f"MCP server {name!r} is not running in this process")
    if not isinstance(arguments, dict):
        raise ValidationError("arguments: must be a JSON object")
    if nested_too_deep(arguments):
        raise ValidationError("arguments: nested too deeply")
    full = source.full_name(tool)
    if not any(isinstance(a, McpTool) and a.tool_name == tool for a in source.actions()):
        raise NotFoundError(
            f"MCP server {name!r} offers no tool {tool[:100]!r} now ({source.shown_state})"
        )
    try:
        action = runtime.registry.validate(full, arguments)
    except ActionCallError as exc:
        raise ValidationError(f"arguments: {exc.reason}") from None
    assert isinstance(action, McpTool)
    log.info("MCP tool %s called from the dashboard by %s (an operator's test)", full, actor)
    result = await action.call(arguments, runtime.settings.agent.max_event_bytes)
    data = result.data if isinstance(result.data, dict) else {}
    redactor = runtime.router.redactor
    if redactor.leaks(json.dumps(data, ensure_ascii=False, default=str)):
        # a tool that echoes a secret (its bearer token…) shows it redacted here
        data = json.loads(redactor.redact(json.dumps(data, ensure_ascii=False, default=str)))
    return McpCallResult(
        success=result.success,
        text=data.get("text"),
        structured=data.get("structured"),
        content=list(data.get("content", [])),
        error=redactor.redact(result.error) if result.error else None,
    )
