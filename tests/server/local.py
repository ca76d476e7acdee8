"""The in-process test client, addressed the way a local browser or CLI addresses the server.

Starlette's TestClient calls itself `testserver`, a name the server does not answer to
(the Host check, opencrab.server.guard). `LocalClient` talks to `http://127.0.0.1:8080`,
the packaged bind address and port, for HTTP and WebSockets alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urljoin

from fastapi.testclient import TestClient
from starlette.testclient import WebSocketTestSession
from starlette.types import ASGIApp

ORIGIN = "http://127.0.0.1:8080"


class LocalClient(TestClient):
    """A TestClient whose requests and WebSockets go to `ORIGIN`."""

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        options.setdefault("base_url", ORIGIN)
        super().__init__(app, **options)

    def websocket_connect(
        self, url: str, subprotocols: Sequence[str] | None = None, **options: Any
    ) -> WebSocketTestSession:
        return super().websocket_connect(
            urljoin("ws://127.0.0.1:8080", url), subprotocols, **options
        )
