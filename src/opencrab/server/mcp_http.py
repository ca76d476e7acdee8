"""`/mcp`: OpenCrab's MCP server (opencrab.mcp.server) over streamable HTTP, on the REST
API's port.

The route sits inside the app's middleware, so it has what every route has: the Host
check and the cross-site guard (opencrab.server.guard: `/mcp` also refuses a browser
page of another origin on GET, as the MCP specification asks), the bearer check when
tokens are required (opencrab.server.auth) and the body limits. Each tool checks the
token's scope (read, chat, operate) itself; without tokens the caller is "local".
The SDK's session manager runs inside the app's lifespan (`McpEndpoint.serving`).

Example:
    endpoint = McpEndpoint()
    app.router.routes.append(Route(MCP_PATH, endpoint))
    async with endpoint.serving(runtime):
        ...  # serve
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import HTTPConnection
from starlette.types import Receive, Scope, Send

from opencrab.auth import ApiToken
from opencrab.core.runtime import Runtime
from opencrab.mcp.server import mcp_server
from opencrab.mcp.tools import Caller
from opencrab.server.errors import error_response

MCP_PATH = "/mcp"


def http_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller of an HTTP request: its API token's name and scope, else "local"."""
    request = ctx.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    token: ApiToken | None = state.get("api_token")
    return Caller("local") if token is None else Caller(token.name, token.scope)


class McpEndpoint:
    """The ASGI app at `/mcp`: the SDK's streamable HTTP transport while `serving`."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def serving(self, runtime: Runtime) -> AsyncIterator[None]:
        """Run the session manager over `runtime` (the app's lifespan holds this)."""
        manager = StreamableHTTPSessionManager(app=mcp_server(runtime, http_caller))
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            response = error_response(
                HTTPConnection(scope), 503, "unavailable", "the MCP server is not running"
            )
            await response(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)
