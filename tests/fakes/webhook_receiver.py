"""A webhook receiver on 127.0.0.1 that checks the inbox's signature as a user's would.

`WebhookReceiver(secret)` serves POST /hook from a thread (uvicorn): each request's raw
body is verified with HMAC-SHA256 over `<timestamp>.<body>` (the documented scheme,
written out here again rather than imported, so a change on the sending side that
breaks it fails the test) and kept with its headers. `mode` decides the answer: "ok"
(204), "fail" (500) or "hang" (it waits until the receiver stops, the sender's
timeout must end it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.ports import free_port
from tests.fakes.threaded_server import serve_in_thread


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    valid: bool

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    secret: str
    mode: str = "ok"
    received: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def check(self, body: bytes, headers: dict[str, str]) -> bool:
        stamp = headers.get("x-opencrab-timestamp", "")
        given = headers.get("x-opencrab-signature", "")
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > 300:
            return False
        mac = hmac.new(self.secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
        return hmac.compare_digest(given, "sha256=" + mac.hexdigest())

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append(Received(body, headers, self.check(body, headers)))
        self.arrived.set()
        if self.mode == "hang":
            import anyio

            await anyio.to_thread.run_sync(self.released.wait, 60)
        if self.mode == "fail":
            return Response("broken", status_code=500)
        return Response(status_code=204)

    def wait_for(self, count: int, timeout: float = 60) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"{len(self.received)} of {count} arrived"
            time.sleep(0.02)
        return list(self.received)

    @contextmanager
    def serving(self) -> Iterator[str]:
        """Serve until the block ends; yields the hook's URL."""
        app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])
        with serve_in_thread(app, free_port()) as base:
            try:
                yield f"{base}/hook"
            finally:
                self.released.set()  # before the server stops: it waits for a hanging hook
