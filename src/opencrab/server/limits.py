"""Request limits: bodies capped before they are read, WebSockets capped per client.

**Bodies.** A request body is held to `[gateway.rest] max_body_kb` (1024 KiB unless set):
one whose Content-Length is over it gets 413 `payload_too_large` at the route's first
read, before any of it is read, and one sent without a length (chunked) is counted as it
is read and refused with the same 413 as soon as the count passes the limit, so no more
of it is kept (uvicorn reads what the client still sends and drops it, so the client gets
the answer rather than a reset connection). A route that takes an upload marks its
endpoint with `takes_upload`: its body streams to disk and its own quota is its limit
(the workspace's file upload, api/workspace.py). FastAPI's own `max_body_size` is not
used: it answers a declared length over the limit in plain text, not in the API's
error shape.

**WebSockets.** One client (the same bearer token, else the same remote address) keeps at
most `[gateway.rest] ws_max_per_client` WebSockets open at once (16 unless set); the next
is accepted and closed at once with code 4429 and a reason naming the setting.

    @router.put("/agents/{id}/workspace/{path:path}")
    @takes_upload
    async def write_workspace_file(...): ...
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from opencrab.gateway.configs import RestConfig

TOO_MANY_SOCKETS = 4429  # WebSocket close code: this client has too many open

F = TypeVar("F", bound=Callable[..., Any])

_UPLOAD_ENDPOINTS: set[Callable[..., Any]] = set()


def takes_upload(endpoint: F) -> F:
    """Mark a route's endpoint as taking an upload (its own quota is its body's limit)."""
    _UPLOAD_ENDPOINTS.add(endpoint)
    return endpoint


class BodyTooLarge(HTTPException):
    """A request body over `[gateway.rest] max_body_kb` (413, in the API's error shape)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is over the limit of {limit} bytes ([gateway.rest] max_body_kb)",
        )


class RequestLimits:
    """ASGI middleware: the body limit and WebSockets per client (module docstring)."""

    def __init__(self, app: ASGIApp, rest: RestConfig) -> None:
        self.app = app
        self.body_limit = rest.max_body_kb * 1024
        self.sockets_per_client = rest.ws_max_per_client
        self.sockets: Counter[str] = Counter()  # open WebSockets by client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.app(scope, self._counting(scope, receive), send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # ------------------------------------------------------------ bodies
    def _counting(self, scope: Scope, receive: Receive) -> Receive:
        """`receive` that refuses the body (BodyTooLarge) once it is over the limit; the
        route is known by the first read (an upload's is not limited here)."""
        declared = _content_length(scope)
        counted = 0

        async def counting_receive() -> Message:
            nonlocal counted
            if scope.get("endpoint") in _UPLOAD_ENDPOINTS:
                return await receive()
            if declared is not None and declared > self.body_limit:
                raise BodyTooLarge(self.body_limit)  # before any of it is read
            message = await receive()
            if message["type"] == "http.request":
                counted += len(message.get("body", b""))
                if counted > self.body_limit:
                    raise BodyTooLarge(self.body_limit)
            return message

        return counting_receive

    # ------------------------------------------------------------ WebSockets
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = _client_of(scope)
        if self.sockets[client] >= self.sockets_per_client:
            await _refuse_socket(receive, send, self.sockets_per_client)
            return
        self.sockets[client] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.sockets[client] -= 1
            if self.sockets[client] <= 0:
                del self.sockets[client]


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = bytes(value).decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


def _client_of(scope: Scope) -> str:
    """Whom a WebSocket counts against: its bearer token, else its remote address."""
    token = scope.get("state", {}).get("api_token")
    token_id = getattr(token, "id", None)
    if token_id is not None:
        return f"token:{token_id}"
    client = scope.get("client")
    return f"address:{client[0] if client else 'unknown'}"


async def _refuse_socket(receive: Receive, send: Send, per_client: int) -> None:
    """Accept the handshake and close at once, so the client sees the code and reason."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    reason = (
        f"too many WebSockets open from this client (at most {per_client}: "
        "[gateway.rest] ws_max_per_client)"
    )
    await send({"type": "websocket.close", "code": TOO_MANY_SOCKETS, "reason": reason})
