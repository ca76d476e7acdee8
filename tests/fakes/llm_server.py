"""A scripted HTTP server for provider tests: real sockets, real wire formats.

The server runs uvicorn on 127.0.0.1 (a free port) in a background thread. Tests queue
`Reply`s per path; each request pops the next reply for its path (the last one stays
queued forever once it is the only one left), and every request is recorded.

    server.reply("/v1/chat/completions", Reply(json={...}))
    server.reply("/v1/chat/completions", Reply(sse=[{...}, {...}, "[DONE]"]))
    server.reply("/v1/chat/completions", Reply(status=429, json={"error": {...}}))
    server.reply("/v1/chat/completions", Reply(sse=[...], cut_after=2))   # drop mid-stream
    server.reply("/v1/chat/completions", Reply(delay=5, json={...}))       # for timeouts
    server.reply("/v1/chat/completions", Reply(gate=event, json={...}))    # until event.set()
    server.reply("/v1/chat/completions", Reply(sse=[...], gate=event, gate_after=2))  # mid-stream
    server.reply("/v1/chat/completions", Reply(body=b"{not json", content_type="application/json"))
    server.requests[-1].json   # what the client sent
    server.respond("/v1/messages", lambda request: Reply(...))  # a reply computed per request
    server.respond("/v1beta/models/*", ...)  # a path ending in * answers every path it begins
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.ports import free_port

SseEvent = dict[str, Any] | str | tuple[str, dict[str, Any] | str]
"""A dict or str is sent as `data: …`; (name, data) adds an `event: name` line."""


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    body: bytes | None = None  # sent as is (e.g. a malformed body)
    sse: list[SseEvent] | None = None  # text/event-stream
    ndjson: list[dict[str, Any] | str] | None = None  # application/x-ndjson
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the response starts
    event_delay: float = 0.0  # seconds between streamed events
    cut_after: int | None = None  # close the connection after this many events
    gate: threading.Event | None = None  # held until the test sets it (at most 60 s)
    gate_after: int | None = None  # with gate: hold a stream after this many events instead


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class _Cut(Exception):
    """Raised inside a streaming body to drop the connection mid-stream."""


def _sse_bytes(event: SseEvent) -> bytes:
    if isinstance(event, tuple):
        name, data = event
        text = data if isinstance(data, str) else json.dumps(data)
        return f"event: {name}\ndata: {text}\n\n".encode()
    text = event if isinstance(event, str) else json.dumps(event)
    return f"data: {text}\n\n".encode()


class FakeLlmServer:
    """A scripted server; use as a context manager or through the `fake_llm_server` fixture."""

    def __init__(self) -> None:
        self._replies: dict[str, deque[Reply]] = {}
        self._responders: dict[str, Callable[[Recorded], Reply]] = {}
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(
            routes=[Route("/{path:path}", self._handle, methods=["GET", "POST", "PUT", "DELETE"])]
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="critical", lifespan="off",
            timeout_graceful_shutdown=1,
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    # ------------------------------------------------------------ scripting
    def reply(self, path: str, *replies: Reply) -> None:
        """Queue replies for requests to `path` (query strings are ignored)."""
        with self._lock:
            self._replies.setdefault(path, deque()).extend(replies)

    def respond(self, path: str, responder: Callable[[Recorded], Reply]) -> None:
        """Answer requests to `path` with `responder(request)` (before any queued reply);
        a `path` ending in `*` answers every path that begins with the rest."""
        with self._lock:
            self._responders[path] = responder

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self._responders.clear()
            self.requests.clear()

    def requests_to(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    # ------------------------------------------------------------ lifecycle
    def start(self) -> FakeLlmServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeLlmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ serving
    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        with self._lock:
            recorded = Recorded(
                method=request.method,
                path=path,
                query=dict(request.query_params),
                headers={k.lower(): v for k, v in request.headers.items()},
                body=body,
            )
            self.requests.append(recorded)
            responder = self._responders.get(path) or next(
                (
                    answer
                    for prefix, answer in self._responders.items()
                    if prefix.endswith("*") and path.startswith(prefix[:-1])
                ),
                None,
            )
            queue = self._replies.get(path)
            reply = None
            if responder is not None:
                reply = responder(recorded)
            elif queue:
                reply = queue.popleft() if len(queue) > 1 else queue[0]
        if reply is None:
            return JSONResponse({"error": {"message": f"no reply scripted for {path}"}}, 404)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.gate is not None and reply.gate_after is None:
            await asyncio.to_thread(reply.gate.wait, 60)
        if reply.sse is not None:
            return self._stream(reply, [_sse_bytes(e) for e in reply.sse], "text/event-stream")
        if reply.ndjson is not None:
            lines = [
                (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n" for e in reply.ndjson
            ]
            return self._stream(reply, lines, "application/x-ndjson")
        if reply.body is not None:
            return Response(
                reply.body,
                status_code=reply.status,
                media_type=reply.content_type or "application/json",
                headers=reply.headers,
            )
        return JSONResponse(reply.json, status_code=reply.status, headers=reply.headers)

    def _stream(self, reply: Reply, pieces: list[bytes], media_type: str) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for n, piece in enumerate(pieces):
                if reply.cut_after is not None and n >= reply.cut_after:
                    raise _Cut("stream cut on purpose")
                if reply.event_delay and n:
                    await asyncio.sleep(reply.event_delay)
                if reply.gate is not None and n == reply.gate_after:
                    await asyncio.to_thread(reply.gate.wait, 60)
                yield piece

        return StreamingResponse(
            body(),
            status_code=reply.status,
            media_type=reply.content_type or media_type,
            headers=reply.headers,
        )


def running_server() -> Iterator[FakeLlmServer]:
    """Generator for a pytest fixture: a started server, stopped afterwards."""
    server = FakeLlmServer().start()
    try:
        yield server
    finally:
        server.stop()
