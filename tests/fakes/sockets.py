"""Waiting for the server to close a WebSocket that the test client holds."""

from __future__ import annotations

import threading
from typing import Any

from starlette.websockets import WebSocketDisconnect


def ping_until_closed(ws: Any, tries: int = 300) -> WebSocketDisconnect:
    """Ping until the server closes the socket (it looks every second; ~30 s at most)."""
    for _ in range(tries):
        try:
            ws.send_json({"type": "ping"})
            assert ws.receive_json() == {"type": "pong"}
        except WebSocketDisconnect as closed:
            return closed
        threading.Event().wait(0.1)
    raise AssertionError(f"the socket stayed open for {tries} pings")
