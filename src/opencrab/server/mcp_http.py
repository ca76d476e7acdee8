"""`/mcp`: OpenCrab's MCP server (opencrab.mcp.server) over streamable HTTP, on the REST
API's port.

The route sits inside the app's middleware, so it has what every route has: the Host
check and the cross-site guard (opencrab.server.guard: `/mcp` also refuses a browser
page of another origin on GET, as the MCP specification asks), the bearer check when
tokens are required (opencrab.server.auth) and the body limits. Each tool checks the
token's scope (read, chat, operate) itself; without tokens the caller is "local".
The SDK's session manager runs inside the app's lifespan (`McpEndpoint.serving`).

A POST body is checked before the SDK reads it: JSON that is no JSON-RPC 2.0 message
(not an object, `jsonrpc` not "2.0", a `method` that is no string, `params` that are no
object, an `id` that is neither string nor integer, a response without `result` or
`error`) is answered 400 with a JSON-RPC error -32600 naming the field, never echoing
the value; a body that is no JSON at all gets the SDK's own -32700.

Example:
    endpoint = McpEndpoint()
    app.router.routes.append(Route(MCP_PATH, endpoint))
    async with endpoint.serving(runtime):
        ...  # serve
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

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
        if scope.get("method") == "POST":
            body, receive = await _read_body(receive)
            problem = message_problem(body)
            if problem is not None:
                error = {"code": -32600, "message": f"Invalid Request: {problem}"}
                answer = {"jsonrpc": "2.0", "id": None, "error": error}
                await JSONResponse(answer, status_code=400)(scope, receive, send)
                return
        await self.manager.handle_request(scope, receive, send)


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's whole body (the app's body limit has capped it), and a `receive`
    that hands it on as it came, then whatever the client sends next."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # gone before its body ended
            first: Message = message
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            break
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return first
        return await receive()

    return b"".join(chunks), replay


def message_problem(body: bytes) -> str | None:
    """Why a JSON body is no JSON-RPC 2.0 message (None: it is one, or it is no JSON,
    which the SDK answers itself)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return f"the body is a JSON {type(message).__name__}, not one JSON-RPC message object"
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "id" in message and not (
        isinstance(message["id"], str)
        or (isinstance(message["id"], int) and not isinstance(message["id"], bool))
    ):
        return '"id" must be a string or an integer'
    if "method" in message:
        if not isinstance(message["method"], str):
            return '"method" must be a string'
        if "params" in message and not isinstance(message["params"], dict):
            return '"params" must be an object'
        return None
    if "id" not in message:
        return 'a message needs a "method" (a request or notification) or an "id" (a response)'
    if ("result" in message) == ("error" in message):
        return 'a response needs one of "result" and "error"'
    return None
