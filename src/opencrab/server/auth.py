"""Bearer-token authentication for the HTTP and WebSocket routes (a pure ASGI middleware).

Every request except `OPEN_PATHS` and the docs' assets (`OPEN_PREFIX`) must carry
`Authorization: Bearer ocb_…` naming an active token (opencrab.auth.TokenStore).
Browsers cannot set headers on a WebSocket, so a WebSocket may pass the token as
`?access_token=…` instead. Failures get 401 with
`WWW-Authenticate: Bearer` and the usual error body (OpenAI's under `/v1`); a refused
WebSocket is closed with code 4401 before it is accepted.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from opencrab.auth import TokenStore
from opencrab.server.docs import DOC_PATHS, VENDOR_URL
from opencrab.server.errors import error_body, is_openai_path, openai_error_body

OPEN_PATHS = frozenset({"/api/health", "/openapi.json", *DOC_PATHS})
OPEN_PREFIX = VENDOR_URL + "/"
SCHEME = "bearerAuth"


def is_open(path: str) -> bool:
    """Whether `path` is served without a token: health, the OpenAPI document, the docs."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIX)


def bearer_of(scope: Scope) -> str | None:
    """The token a request carries, if any."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            kind, _, secret = bytes(value).decode("latin-1").partition(" ")
            if kind.lower() == "bearer" and secret.strip():
                return secret.strip()
            return None
    if scope["type"] == "websocket":
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        found = query.get("access_token")
        if found:
            return str(found[0])
    return None


class BearerAuth:
    """Refuse requests without an active token; the token goes to `scope["state"]`."""

    def __init__(self, app: ASGIApp, tokens: TokenStore) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        secret = bearer_of(scope)
        token = self.tokens.verify(secret) if secret else None
        if token is None:
            reason = "invalid or revoked bearer token" if secret else "missing bearer token"
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4401, "reason": reason})
                return
            await _unauthorized(send, reason, openai=is_openai_path(scope["path"]))
            return
        scope.setdefault("state", {})["api_token"] = token
        await self.app(scope, receive, send)


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
