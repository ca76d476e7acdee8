"""What a web page in the operator's browser may do: the Host check and the cross-site guard.

**Host check (DNS rebinding).** A page on `evil.example` can point its own name at
127.0.0.1; the browser then sends its requests to this server with
`Host: evil.example`. The server answers only to its own names: `localhost`,
`127.0.0.1`, `[::1]`, its bind address (`[gateway.rest] host`), the IP address the
connection arrived on (a wildcard bind), and `[gateway.rest] allowed_hosts`. Any other
Host gets 421 `unknown_host`; none (or two) gets 400. A WebSocket is closed with 4421.

**Cross-site guard (CSRF).** A request that may change state (any method but GET, HEAD
and OPTIONS) must not come from another site's page:
- an Origin in `[gateway.rest] cors_origins` passes (a trusted app; `*` trusts all);
- `Sec-Fetch-Site` (every current browser sends it) must be `same-origin` or `none`
  (the user's own navigation); `same-site` and `cross-site` are refused;
- without it (older browsers), the Origin must be one of the server's own origins;
- with neither header the request does not come from a web page (curl, SDKs, the CLI)
  and passes.
Refused requests get 403 `cross_site_request` before anything runs. Forms of the
dashboard post from the server's own origin (`same-origin`) and pass; the same form
posted from any other page does not.

**WebSocket and MCP origin.** A browser always sends Origin on a WebSocket handshake.
It must be one of the server's own origins or in `cors_origins`, else the socket is
closed with 4403 before it is accepted. A request to `/mcp` (`STRICT_ORIGIN_PATHS`) of
any method that carries an Origin is held to the same rule (403 otherwise), as the MCP
specification asks of a streamable HTTP server: its GET opens an event stream. The
server's own origins are http or https, one of its names and the port the connection
arrived on; the request's Host header is never used.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from opencrab.config.hosts import host_name, split_host
from opencrab.gateway.configs import RestConfig
from opencrab.server.errors import error_response

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::"})  # noqa: S104 - recognised, not bound
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_ORIGIN = frozenset({"same-origin", "none"})  # Sec-Fetch-Site values that pass
DEFAULT_PORTS = {"http": 80, "https": 443}
UNKNOWN_HOST = 4421  # WebSocket close code: the Host is not one of the server's names
FORBIDDEN_ORIGIN = 4403  # WebSocket close code: a page from another origin
STRICT_ORIGIN_PATHS = frozenset({"/mcp"})
"""Paths whose every request's Origin, when it has one, must be the server's or trusted."""


class ServerNames:
    """The names and origins this server answers to (see the module docstring)."""

    def __init__(self, rest: RestConfig) -> None:
        bind = host_name(rest.host)
        names = set(LOCAL_NAMES) | set(rest.allowed_hosts)
        if bind is not None and bind not in WILDCARDS:
            names.add(bind)
        self.names = frozenset(names)
        self.cors = frozenset(rest.cors_origins)

    def answers_to(self, name: str, scope: Scope) -> bool:
        """Whether `name` (normalised) is one of the server's names for this connection."""
        return name in self.names or name == _local_address(scope)[0]

    def trusted(self, origin: str) -> bool:
        """Whether `origin` is listed in `cors_origins` (or that list has `*`)."""
        return origin in self.cors or "*" in self.cors

    def own_origin(self, origin: str, scope: Scope) -> bool:
        """Whether `origin` is this server: http(s), one of its names, the port it serves."""
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in DEFAULT_PORTS or parts.path or parts.query or not parts.hostname:
            return False
        name = host_name(parts.hostname)
        _, served_port = _local_address(scope)
        if name is None or served_port is None or not self.answers_to(name, scope):
            return False
        return (port or DEFAULT_PORTS[parts.scheme]) == served_port


class BrowserGuard:
    """ASGI middleware: the Host check, then the cross-site guard (module docstring)."""

    def __init__(self, app: ASGIApp, rest: RestConfig) -> None:
        self.app = app
        self.names = ServerNames(rest)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self.host_problem(headers, scope) or self.cross_site_problem(headers, scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        if scope["type"] == "websocket":
            close = UNKNOWN_HOST if status != 403 else FORBIDDEN_ORIGIN
            reason = message.encode()[:120].decode(errors="ignore")
            await send({"type": "websocket.close", "code": close, "reason": reason})
            return
        response = error_response(HTTPConnection(scope), status, code, message)
        await response(scope, receive, send)

    def host_problem(self, headers: Headers, scope: Scope) -> tuple[int, str, str] | None:
        """(status, code, message) when the Host header does not name this server."""
        given = headers.getlist("host")
        if len(given) != 1 or not given[0].strip():
            return 400, "bad_request", "a request needs exactly one Host header"
        name, _ = split_host(given[0])
        if name is not None and self.names.answers_to(name, scope):
            return None
        return (
            421,
            "unknown_host",
            f"this server does not answer to the host {given[0][:100]!r}: a page whose "
            "name was pointed at this machine (DNS rebinding) is refused; to reach the "
            "server under this name add it to [gateway.rest] allowed_hosts",
        )

    def cross_site_problem(self, headers: Headers, scope: Scope) -> tuple[int, str, str] | None:
        """(403, code, message) for a browser page of another site that may not do this."""
        origin = headers.get("origin")
        if scope["type"] == "websocket" or scope["path"] in STRICT_ORIGIN_PATHS:
            allowed = origin is None or self.names.own_origin(origin, scope)
        elif scope["method"] in SAFE_METHODS:
            return None
        else:
            site = headers.get("sec-fetch-site")
            if site is not None:
                allowed = site.lower() in SAME_ORIGIN
            else:
                allowed = origin is None or self.names.own_origin(origin, scope)
        if allowed or (origin is not None and self.names.trusted(origin)):
            return None
        return (
            403,
            "cross_site_request",
            f"a page from another site (Origin {(origin or 'unknown')[:100]}) may not "
            f"{'open the WebSocket' if scope['type'] == 'websocket' else 'change anything'} "
            "here; an origin that should be allowed goes in [gateway.rest] cors_origins",
        )


def _local_address(scope: Scope) -> tuple[str | None, int | None]:
    """The IP address and port the connection arrived on (None for other transports)."""
    server = scope.get("server")
    if not server or len(server) != 2 or not isinstance(server[1], int):
        return None, None
    try:
        address = str(ipaddress.ip_address(str(server[0])))
    except ValueError:
        return None, server[1]
    return address, server[1]
