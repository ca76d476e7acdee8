"""Bearer-token authentication for the HTTP and WebSocket routes (a pure ASGI middleware).

Every request except `OPEN_PATHS`, static assets (`OPEN_PREFIXES`) and the A2A Agent
Cards (opencrab.a2a.server_paths) must carry
`Authorization: Bearer ocb_…` naming an active token (opencrab.auth.TokenStore).
Browsers cannot set headers on a WebSocket, so a WebSocket may offer the token as a
subprotocol, `opencrab.bearer.<token>` beside `opencrab` (`WS_SUBPROTOCOL`, the one the
server answers with: the token is never echoed), or pass it as `?access_token=…` (kept
working, but a URL travels further: the server's own log lines mask it,
opencrab.server.log_masking). The dashboard's login page (opencrab.dashboard.login)
exchanges the token for a sign-in whose id (`ocs_…`, never the token) is kept in an
HttpOnly, SameSite=Strict cookie (`SESSION_COOKIE`); it counts as the bearer when there
is no Authorization header, until it is signed out, expires or its token is revoked; the
cross-site guard still applies to it. The token goes to `scope["state"]["api_token"]`
(its scope is checked per route by opencrab.server.scopes), a sign-in's id to
`scope["state"]["login_id"]`.
Failures get 401 with `WWW-Authenticate: Bearer` and the usual error body (OpenAI's under
`/v1`); a page of the dashboard (`DashboardPaths`) is sent to the login page instead. A
refused WebSocket is closed with code 4401 before it is accepted. A WebSocket stays open past
the check, so `TokenWatch` closes it (4401) once its token is revoked or its sign-in ended,
whichever process did it (`opencrab token revoke`, signing out).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from opencrab.a2a.server_paths import PREFIX as A2A_PREFIX
from opencrab.a2a.server_paths import is_card_path
from opencrab.auth import LOGIN_PREFIX, ApiToken, TokenStore
from opencrab.server.docs import DOC_PATHS
from opencrab.server.errors import error_body, is_openai_path, openai_error_body

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/api/health", "/openapi.json", *DOC_PATHS})
OPEN_PREFIXES = ("/static/",)
"""Static assets (the docs' and the dashboard's scripts and styles): no secrets in them."""
SESSION_COOKIE = "opencrab_session"
"""The dashboard's login cookie: a sign-in's id (not the token), HttpOnly, SameSite=Strict."""
WS_SUBPROTOCOL = "opencrab"
"""The WebSocket subprotocol of `/api/ws`, answered when the client offers it."""
BEARER_SUBPROTOCOL = "opencrab.bearer."
"""A WebSocket subprotocol offered as `opencrab.bearer.<token>` carries the token."""
SCHEME = "bearerAuth"
UNAUTHORIZED = 4401  # WebSocket close code: no, a wrong or a revoked token


def is_open(path: str, open_paths: frozenset[str] = OPEN_PATHS) -> bool:
    """Whether `path` is served without a token: health, the OpenAPI document, the docs,
    the A2A Agent Cards (opencrab.a2a.server_paths)."""
    return path in open_paths or path.startswith(OPEN_PREFIXES) or is_card_path(path)


def bearer_of(scope: Scope) -> str | None:
    """The secret a request carries, if any: the header's token, else (a WebSocket) a
    bearer subprotocol, else the dashboard's cookie (a sign-in's id), else (a WebSocket)
    `?access_token=`."""
    cookie: str | None = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            kind, _, secret = bytes(value).decode("latin-1").partition(" ")
            if kind.lower() == "bearer" and secret.strip():
                return secret.strip()
            return None
        if name == b"cookie" and cookie is None:
            cookie = _cookie(bytes(value).decode("latin-1"), SESSION_COOKIE)
    if scope["type"] == "websocket":
        for offered in scope.get("subprotocols", ()):
            if offered.startswith(BEARER_SUBPROTOCOL) and len(offered) > len(BEARER_SUBPROTOCOL):
                return str(offered[len(BEARER_SUBPROTOCOL) :])
    if cookie:
        return cookie
    if scope["type"] == "websocket":
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        found = query.get("access_token")
        if found:
            return str(found[0])
    return None


def ws_subprotocol(scope: Scope) -> str | None:
    """The subprotocol to accept a WebSocket with: `WS_SUBPROTOCOL` when offered, else
    none (never the `opencrab.bearer.` one, which would echo the token)."""
    return WS_SUBPROTOCOL if WS_SUBPROTOCOL in scope.get("subprotocols", ()) else None


def _cookie(header: str, wanted: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == wanted and value:
            return value
    return None


class BearerAuth:
    """Refuse requests without an active token; the token goes to `scope["state"]`.

    `pages` tells a dashboard page from an API path: a browser asking for a page
    without a valid token is redirected to `pages.login` rather than given JSON.
    """

    def __init__(
        self, app: ASGIApp, tokens: TokenStore, pages: DashboardPaths | None = None
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.pages = pages
        self.open_paths = OPEN_PATHS | (pages.open_paths if pages else frozenset())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or is_open(scope["path"], self.open_paths):
            await self.app(scope, receive, send)
            return
        secret = bearer_of(scope)
        token, login_id = self.identify(secret) if secret else (None, None)
        if token is None:
            reason = "invalid or revoked bearer token" if secret else "missing bearer token"
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": UNAUTHORIZED, "reason": reason})
                return
            if self.pages is not None and self.pages.is_page(scope["path"]):
                await _to_login(send, scope, self.pages.login)
                return
            await _unauthorized(send, reason, openai=is_openai_path(scope["path"]))
            return
        state = scope.setdefault("state", {})
        state["api_token"] = token
        if login_id is not None:
            state["login_id"] = login_id
        await self.app(scope, receive, send)

    def identify(self, secret: str) -> tuple[ApiToken | None, str | None]:
        """(the token, the sign-in's id) a secret stands for: a token or a live sign-in."""
        if secret.startswith(LOGIN_PREFIX):
            found = self.tokens.signed_in(secret)
            return (None, None) if found is None else (found[1], found[0])
        return self.tokens.verify(secret), None


class TokenWatch:
    """Tells long-lived connections that their token was revoked or their sign-in ended.

    One query per look covers every watched token, one every watched sign-in; it looks
    every `poll_secs` while anything is watched, so a revocation made by another process
    (the CLI) or a sign-out served by another process is seen too.

    Example:
        revoked = watch.watch(token.id, login_id)   # an asyncio.Event, set when either ends
        ...
        watch.forget(token.id, revoked, login_id)
    """

    def __init__(self, tokens: TokenStore, *, poll_secs: float = 1.0) -> None:
        self.tokens = tokens
        self.poll_secs = poll_secs
        self._watched: dict[str, set[asyncio.Event]] = {}  # token id -> its connections'
        self._logins: dict[str, set[asyncio.Event]] = {}  # sign-in id -> its connections'
        self._stopping = asyncio.Event()

    def watch(self, token_id: str, login_id: str | None = None) -> asyncio.Event:
        """An event set once `token_id` is revoked or the sign-in `login_id` ends."""
        revoked = asyncio.Event()
        self._watched.setdefault(token_id, set()).add(revoked)
        if login_id is not None:
            self._logins.setdefault(login_id, set()).add(revoked)
        return revoked

    def forget(self, token_id: str, revoked: asyncio.Event, login_id: str | None = None) -> None:
        """Stop watching for one connection."""
        for watched, key in ((self._watched, token_id), (self._logins, login_id)):
            if key is None or key not in watched:
                continue
            watched[key].discard(revoked)
            if not watched[key]:
                del watched[key]

    async def look(self) -> int:
        """Set the events of every revoked token and ended sign-in now; returns how many
        tokens and sign-ins were found gone."""
        gone = 0
        for watched, ended_among in (
            (self._watched, self.tokens.revoked_among),
            (self._logins, self.tokens.ended_logins_among),
        ):
            if not watched:
                continue
            ended = await asyncio.to_thread(ended_among, list(watched))
            gone += len(ended)
            for key in ended:
                for revoked in watched.pop(key, ()):
                    revoked.set()
        return gone

    async def run(self) -> None:
        """Look every `poll_secs` until `stop()`."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.poll_secs)
            try:
                await self.look()
            except Exception:  # a failed read must not end the watch
                log.exception("token watch: reading revoked tokens failed")

    def stop(self) -> None:
        self._stopping.set()


class DashboardPaths:
    """Which paths are the dashboard's pages, and which of them need no token."""

    def __init__(self, *, login: str, open_paths: frozenset[str]) -> None:
        self.login = login
        self.open_paths = open_paths

    def is_page(self, path: str) -> bool:
        """Not the API, `/v1`, `/mcp`, `/a2a`, the OpenAPI document or the docs: a
        dashboard page."""
        return (
            not (
                path in ("/api", "/v1", "/mcp", A2A_PREFIX)
                or path.startswith(("/api/", "/v1/", "/static/", f"{A2A_PREFIX}/"))
            )
            and path not in OPEN_PATHS
        )


async def _to_login(send: Send, scope: Scope, login: str) -> None:
    target = scope["path"]
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    if query:
        target += "?" + query
    location = f"{login}?{urlencode({'next': target})}"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _unauthorized(send: Send, reason: str, *, openai: bool) -> None:
    message = (
        f"{reason}: send `Authorization: Bearer <token>` "
        "(create one with `opencrab token create NAME`)"
    )
    shaped = (
        openai_error_body(401, message, code="invalid_api_key")
        if openai
        else error_body("unauthorized", message)
    )
    body = json.dumps(shaped).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="opencrab"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def document_security(app: FastAPI, *, required: bool) -> None:
    """Put the bearer scheme and the 401 answer into the OpenAPI document.

    With `required` every operation but the open ones needs the token; otherwise the
    token is documented as optional (loopback without `require_token`).
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        schema.setdefault("components", {}).setdefault("securitySchemes", {})[SCHEME] = {
            "type": "http",
            "scheme": "bearer",
            "description": "A token from `opencrab token create NAME`.",
        }
        security: list[dict[str, list[str]]] = [{SCHEME: []}] if required else [{}, {SCHEME: []}]
        for path, operations in schema.get("paths", {}).items():
            if path in OPEN_PATHS:
                continue
            for operation in operations.values():
                operation["security"] = security
                if not required:
                    continue
                operation.setdefault("responses", {}).setdefault(
                    "401",
                    {
                        "description": "Missing or invalid bearer token",
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
