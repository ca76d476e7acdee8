"""What each route needs a token's scope to cover, and the one check that enforces it.

Scopes nest: read ⊂ chat ⊂ operate ⊂ admin (opencrab.auth.Scope). Reading (GET and
HEAD, which the cross-site guard already treats as changing nothing) needs `read`; every
other method is declared in `ROUTE_SCOPES` by method and path template:
- `chat`: talking to agents — a chat session and its messages, discussions, `/v1` chat
  completions, a persona preview (one model call, nothing stored);
- `operate`: every other change — approvals, agents and their persona, memory, skills,
  workspace files, LLM settings and budgets, tickets, schedules, imports, agent mode,
  deletions, dismissing an inbox item;
- `admin`: what changes security — an agent's tool settings (switching on
  execute_command, http_request, fetch_webpage), the inbox webhook's signing secret and
  a chat gateway's settings (its tokens, who it answers);
- `OPEN` (None): the sign-in and sign-out forms, which need no token, and the chat
  platforms' webhooks (`/hooks/<gateway>/…`, each checking its platform's signature).
A route of a plugin declares its own with `openapi_extra={"x-scope": "chat"}`; a
state-changing route declared nowhere needs `admin`. The WebSocket opens with `read`;
its chat and discussion messages need `chat` (server/api/ws.py).
`/mcp` (server/mcp_http.py) is no route of these: any token may open it, and each
MCP tool checks the scope it declares (opencrab.mcp.tools: the scope of its REST route).
Nor is `/a2a/{agent}` (server/a2a_http.py): each A2A operation checks its own (sending a
message and canceling a task `chat`, reading tasks `read`; opencrab.a2a.server).

`require_scope` runs before every route (the first of `ROUTE_CHECKS`, which the app
runs as its one dependency, `check_route`): a token whose scope does not cover the
route's is refused with 403 `forbidden` naming both. Without a token — the open loopback
mode, or a path that needs none — nothing is refused here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.requests import HTTPConnection

from opencrab.auth import ApiToken, Scope
from opencrab.errors import ForbiddenError
from opencrab.server.errors import refuse_unknown_query, refuse_unreadable_json

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OPEN: Scope | None = None
SCOPE_KEY = "x-scope"
"""The OpenAPI extension that names an operation's scope (and lets a plugin declare it)."""

READ, CHAT, OPERATE, ADMIN = Scope.read, Scope.chat, Scope.operate, Scope.admin

ROUTE_SCOPES: dict[str, Scope | None] = {
    # the dashboard's forms
    "POST /login": OPEN,
    "POST /logout": OPEN,
    # the chat platforms' webhooks (server/auth.py OPEN_PREFIXES): signed, not tokened
    "POST /hooks/line": OPEN,
    "WEBSOCKET /api/ws": READ,
    # talking to agents
    "POST /api/sessions": CHAT,
    "POST /api/sessions/{id}/messages": CHAT,
    "POST /api/discussions": CHAT,
    "POST /api/discussions/{id}/messages": CHAT,
    "POST /api/discussions/{id}/participants": CHAT,
    "POST /v1/chat/completions": CHAT,
    "POST /api/agents/{id}/preview": CHAT,
    "POST /api/agents/{id}/memory/search": READ,  # a search with a body, changes nothing
    # changing state
    "POST /api/approvals/{id}/approve": OPERATE,
    "POST /api/approvals/{id}/deny": OPERATE,
    "POST /api/inbox/{id}/dismiss": OPERATE,
    "PUT /api/inbox/webhook-secret": ADMIN,
    "POST /api/agents": OPERATE,
    "PUT /api/agents/{id}": OPERATE,
    "DELETE /api/agents/{id}": OPERATE,
    "PUT /api/agents/{id}/soul": OPERATE,
    "PUT /api/agents/{id}/identity": OPERATE,
    "PUT /api/agents/{id}/heartbeat": OPERATE,
    "PUT /api/agents/{id}/llm/config": OPERATE,
    "PUT /api/agents/{id}/budget": OPERATE,
    "PUT /api/budgets": OPERATE,
    "POST /api/agents/{id}/memory/curated": OPERATE,
    "PUT /api/agents/{id}/memory/curated/{memory_id}": OPERATE,
    "DELETE /api/agents/{id}/memory/curated/{memory_id}": OPERATE,
    "POST /api/agents/{id}/skills": OPERATE,
    "PUT /api/agents/{id}/skills/{skill_id}": OPERATE,
    "DELETE /api/agents/{id}/skills/{skill_id}": OPERATE,
    "POST /api/agents/{id}/skills/{skill_id}/toggle": OPERATE,
    "PUT /api/agents/{id}/workspace/{path:path}": OPERATE,
    "DELETE /api/agents/{id}/workspace/{path:path}": OPERATE,
    "DELETE /api/sessions/{id}": OPERATE,
    "DELETE /api/discussions/{id}": OPERATE,
    "PATCH /api/llm/providers/{name}": OPERATE,
    "POST /api/llm/providers/{name}/test": OPERATE,
    "PUT /api/llm/aliases/{alias}": OPERATE,
    "DELETE /api/llm/aliases/{alias}": OPERATE,
    "PUT /api/llm/fallback": OPERATE,
    "POST /api/tickets": OPERATE,
    "DELETE /api/tickets/{id}": OPERATE,
    "PATCH /api/tickets/{id}/resume": OPERATE,
    "PATCH /api/tickets/{id}/reset": OPERATE,
    "POST /api/agents/{id}/schedules": OPERATE,
    "POST /api/agents/{id}/schedules/pause": OPERATE,
    "POST /api/agents/{id}/schedules/resume": OPERATE,
    "POST /api/schedules/{id}/pause": OPERATE,
    "POST /api/schedules/{id}/resume": OPERATE,
    "POST /api/schedules/{id}/run-now": OPERATE,
    "DELETE /api/schedules/{id}": OPERATE,
    "POST /api/schedule-runs/{id}/acknowledge": OPERATE,
    "POST /api/imports": OPERATE,
    "POST /api/imports/jobs/{id}/cancel": OPERATE,
    "POST /api/agent-mode/sessions": OPERATE,
    "PUT /api/agent-mode/sessions/{id}/plan": OPERATE,
    "POST /api/agent-mode/sessions/{id}/start": OPERATE,
    "POST /api/agent-mode/sessions/{id}/pause": OPERATE,
    "POST /api/agent-mode/sessions/{id}/resume": OPERATE,
    "POST /api/agent-mode/sessions/{id}/cancel": OPERATE,
    "POST /api/agent-mode/sessions/{id}/cleanup": OPERATE,
    "POST /api/agent-mode/sessions/{id}/tasks/{task}/answer": OPERATE,
    "POST /api/agent-mode/sessions/{id}/tasks/{task}/retry": OPERATE,
    # changing security
    "PUT /api/agents/{id}/tool-settings": ADMIN,
    "PUT /api/agents/{id}/tools/{name}": ADMIN,
    # an MCP server added here runs a command (or reaches a URL) with its secrets
    "POST /api/mcp/servers": ADMIN,
    "PUT /api/mcp/servers/{name}": ADMIN,
    "DELETE /api/mcp/servers/{name}": ADMIN,
    "PUT /api/mcp/servers/{name}/agents/{id}": ADMIN,  # grants, as the route above
    "POST /api/mcp/servers/{name}/tools/{tool}/call": OPERATE,
    "PUT /api/gateways/{name}": ADMIN,  # a chat platform's tokens and who it answers
    "POST /api/gateways/{name}/restart": OPERATE,
    # Slack's Events API: no token of ours; each request's signature is checked instead
    "POST /hooks/slack/events": OPEN,
    "POST /hooks/slack/commands": OPEN,
    "POST /hooks/slack/interactive": OPEN,
}
"""The scope of every state-changing route, by "METHOD /path/template"."""


def declared_scope(route: Any, method: str) -> tuple[bool, Scope | None]:
    """(whether it is declared, the scope) `method` on `route` (a route, or FastAPI's
    RouteContext of an included one) needs; see the module docstring."""
    if method in SAFE_METHODS:
        return True, READ
    path = getattr(route, "path", "")
    key = f"{method} {path}"
    if key in ROUTE_SCOPES:
        return True, ROUTE_SCOPES[key]
    extra: dict[str, Any] = getattr(route, "openapi_extra", None) or {}
    if SCOPE_KEY in extra:
        return True, Scope(extra[SCOPE_KEY])
    return False, ADMIN


def needed_scope(route: Any, method: str) -> Scope | None:
    """The scope `method` on `route` needs (None: no token at all)."""
    return declared_scope(route, method)[1]


def refusal(token: ApiToken, needed: Scope, doing: str) -> str:
    """The message of a 403: the token's scope, what the action needs, how to get it."""
    return (
        f"this token's scope is '{token.scope}'; {doing} needs '{needed}' "
        f"(a token for it: `opencrab token create NAME --scope {needed}`)"
    )


async def require_scope(connection: HTTPConnection) -> None:
    """Refuse (403) a token whose scope does not cover what the matched route needs."""
    token: ApiToken | None = connection.scope.get("state", {}).get("api_token")
    route = connection.scope.get("route")
    if token is None or route is None:
        return  # the open loopback mode (everything allowed) or a path needing no token
    method = "WEBSOCKET" if connection.scope["type"] == "websocket" else connection.scope["method"]
    needed = needed_scope(route, method)
    if needed is None or token.scope.covers(needed):
        return
    raise ForbiddenError(refusal(token, needed, f"{method} {getattr(route, 'path', '')}"))


ROUTE_CHECKS: tuple[Callable[[HTTPConnection], Awaitable[None]], ...] = (
    require_scope,
    refuse_unknown_query,  # opencrab.server.errors
    refuse_unreadable_json,
)
"""What runs before every route, in this order; the first to refuse answers."""


async def check_route(connection: HTTPConnection) -> None:
    """The app's one dependency: `ROUTE_CHECKS` in order. One dependency rather than
    three: FastAPI's cost of solving a dependency was more than these checks' own."""
    for check in ROUTE_CHECKS:
        await check(connection)


def document_scopes(app: FastAPI, *, required: bool) -> None:
    """Name each operation's scope in the OpenAPI document (`x-scope`) and, when tokens
    are `required`, the 403 of a token whose scope falls short."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        routes = {
            (method.lower(), context.path_format): context
            for context in iter_route_contexts(app.routes)
            for method in context.methods or ()
        }
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                route = routes.get((method, path))
                needed = None if route is None else needed_scope(route, method.upper())
                if needed is None:
                    continue
                operation[SCOPE_KEY] = needed.value
                if required and needed is not READ:
                    operation.setdefault("responses", {}).setdefault(
                        "403",
                        {
                            "description": f"The token's scope does not cover '{needed}'",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/ErrorResponse"}
                                }
                            },
                        },
                    )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
