"""OpenCrab as an MCP server: the official SDK's low-level `Server` over opencrab.mcp.tools.

`mcp_server(runtime, caller_of)` builds it for any transport: `opencrab mcp` serves it
over stdio (opencrab.cli.mcp), `opencrab up` over streamable HTTP at `/mcp`
(opencrab.server.mcp_http). `caller_of` says who sends a request (the API token over
HTTP, "local" over stdio); a tool its token's scope does not cover is refused.

A tool call whose arguments break its schema, names nothing, or fails as OpenCrab's
errors do (opencrab.errors) gets an error result (`isError`) whose text names the
problem; an unexpected failure is logged and reported by its type, never as a trace.

Resources (read-only): every agent's persona (`opencrab://agents/{agent}/persona`: its
soul and identity as JSON), its skills' files (`opencrab://agents/{agent}/skills/{skill}`)
and a session with its messages (`opencrab://sessions/{session_id}`, JSON as
`GET /api/sessions/{id}` answers it).

Example:
    server = mcp_server(runtime, lambda ctx: Caller("local"))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote
from uuid import UUID

import jsonschema
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from opencrab import __version__
from opencrab.core.runtime import Runtime
from opencrab.errors import NotFoundError, OpenCrabError
from opencrab.mcp.tools import TOOLS, Caller, McpTool, json_of
from opencrab.offload import run_blocking
from opencrab.reports import sessions

log = logging.getLogger(__name__)

CallerOf = Callable[[ServerRequestContext[Any, Any]], Caller]
PERSONA = "opencrab://agents/{agent}/persona"
SKILL = "opencrab://agents/{agent}/skills/{skill}"
SESSION = "opencrab://sessions/{session_id}"
PREFIX = "opencrab://agents/"
SESSIONS = "opencrab://sessions/"
INSTRUCTIONS = (
    "OpenCrab runs autonomous LLM agents. list_agents names them; chat talks to one; "
    "tickets give one a task to work through; approvals are tool calls waiting for a "
    "person's decision."
)


def sdk_tool(tool: McpTool) -> types.Tool:
    """The tool as tools/list shows it: schema and annotations."""
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=tool.open_world,
        ),
    )


VALIDATORS = {
    name: jsonschema.Draft202012Validator(tool.input_schema) for name, tool in TOOLS.items()
}


def argument_problem(tool: McpTool, arguments: dict[str, Any]) -> str | None:
    """What is wrong with the arguments (the first problem, at its field), or None."""
    errors = sorted(VALIDATORS[tool.name].iter_errors(arguments), key=lambda e: e.path)
    if not errors:
        return None
    error = errors[0]
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{tool.name}: {where}: {_explain(error)}"


RULES = {
    "maxLength": "has more than {} characters",
    "minLength": "has fewer than {} characters",
    "maximum": "is over the maximum of {}",
    "minimum": "is under the minimum of {}",
    "type": "must be of type {}",
    "enum": "must be one of {}",
    "pattern": "must match {}",
}
"""How a broken rule reads without quoting the value (which may be long or secret)."""


def _explain(error: jsonschema.ValidationError) -> str:
    rule = RULES.get(str(error.validator))
    if rule is not None:
        return rule.format(json.dumps(error.validator_value))
    return error.message[:300]  # required, additionalProperties: they name the field


def scope_problem(tool: McpTool, caller: Caller) -> str | None:
    """Why the caller's token may not call the tool (None: it may)."""
    if caller.scope is None or caller.scope.covers(tool.scope):
        return None
    return (
        f"this token's scope is '{caller.scope}'; {tool.name} needs '{tool.scope}' "
        f"(a token for it: `opencrab token create NAME --scope {tool.scope}`)"
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


async def call_tool(
    runtime: Runtime, name: str, arguments: dict[str, Any], caller: Caller
) -> types.CallToolResult:
    """Run one tool for `caller`: its result as JSON text and structured content, or an
    error result naming the problem (see the module docstring)."""
    tool = TOOLS.get(name)
    if tool is None:
        return _error(f"no tool {name[:100]!r}; tools/list names them")
    problem = argument_problem(tool, arguments) or scope_problem(tool, caller)
    if problem is not None:
        return _error(problem)
    try:
        value = await tool.run(runtime, arguments, caller)
    except OpenCrabError as exc:
        return _error(f"{tool.name}: {exc}")
    except Exception as exc:
        log.exception("MCP tool %s failed", tool.name)
        return _error(f"{tool.name} failed: {type(exc).__name__} (the server's log has more)")
    text = json.dumps(value, ensure_ascii=False, indent=1)
    structured = value if isinstance(value, dict) else {"items": value}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


# ------------------------------------------------------------------ resources
def _uri(agent: str, *rest: str) -> str:
    return PREFIX + "/".join(quote(part, safe="") for part in (agent, *rest))


def list_resources(runtime: Runtime) -> list[types.Resource]:
    """Every agent's persona."""
    return [
        types.Resource(
            uri=_uri(name, "persona"),
            name=f"{name}-persona",
            title=f"{name}'s persona",
            description=description or f"The soul and identity of agent {name}.",
            mime_type="application/json",
        )
        for _, name, description in runtime.agents.summaries()
    ]


def read_resource(runtime: Runtime, uri: str) -> types.TextResourceContents:
    """A persona or a session (JSON), or a skill file (markdown); MCPError for any other
    URI or one that names nothing."""
    parts = [unquote(p) for p in uri[len(PREFIX) :].split("/")] if uri.startswith(PREFIX) else []
    try:
        if uri.startswith(SESSIONS):
            found = sessions.session_view(runtime, _session_id(uri[len(SESSIONS) :]))
            text = json.dumps(json_of(found), ensure_ascii=False, indent=1)
            return types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        if len(parts) == 2 and parts[1] == "persona":
            agent = runtime.agents.get(parts[0])
            persona = {
                "agent": agent.name,
                "soul": agent.soul.model_dump(mode="json", by_alias=True),
                "identity": agent.identity.model_dump(mode="json", by_alias=True),
            }
            text, mime = json.dumps(persona, ensure_ascii=False, indent=1), "application/json"
        elif len(parts) == 3 and parts[1] == "skills":
            agent = runtime.agents.get(parts[0])
            text, mime = runtime.engine.skills_for(agent).get(parts[2]).markdown(), "text/markdown"
        else:
            raise MCPError(
                types.INVALID_PARAMS,
                f"no resource {uri[:200]!r}: see {PERSONA}, {SKILL}, {SESSION}",
            )
    except OpenCrabError as exc:
        raise MCPError(types.INVALID_PARAMS, f"{uri[:200]}: {exc}") from None
    return types.TextResourceContents(uri=uri, mime_type=mime, text=text)


def _session_id(text: str) -> str:
    try:
        return str(UUID(unquote(text)))
    except ValueError:
        raise NotFoundError(f"no session {text[:100]!r}") from None


def mcp_server(runtime: Runtime, caller_of: CallerOf) -> Server[Any]:
    """The MCP server over an opened runtime (see the module docstring)."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[sdk_tool(t) for t in TOOLS.values()])

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call_tool(runtime, params.name, dict(params.arguments or {}), caller_of(ctx))

    async def on_list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await run_blocking(list_resources, runtime))

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=PERSONA,
                    name="persona",
                    description="An agent's soul and identity.",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    uri_template=SKILL,
                    name="skill",
                    description="One of an agent's skills as a skill file.",
                    mime_type="text/markdown",
                ),
                types.ResourceTemplate(
                    uri_template=SESSION,
                    name="session",
                    description="A session and its messages.",
                    mime_type="application/json",
                ),
            ]
        )

    async def on_read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        found = await run_blocking(read_resource, runtime, str(params.uri))
        return types.ReadResourceResult(contents=[found])

    return Server(
        "opencrab",
        version=__version__,
        title="OpenCrab",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
    )
