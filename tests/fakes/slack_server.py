"""A fake Slack on 127.0.0.1 speaking Slack's wire format, for the real slack_sdk clients.

- The Web API (`POST /api/<method>`, form or JSON bodies, `Authorization: Bearer`):
  auth.test, apps.connections.open (a `ws://` URL to this server), chat.postMessage,
  chat.update, views.open, files.getUploadURLExternal, files.completeUploadExternal;
  the upload URL it hands out (`POST /upload/<file id>`) and private files
  (`GET /files/<name>`, bot token only).
- Socket Mode (`GET /link`): `hello` on connect, then envelopes the test `push`es
  (events_api, slash_commands, interactive); each must be acknowledged with its
  `envelope_id`, which `push` waits for and returns.
- `down()` makes it unreachable the way a dead host is (sockets closed, nothing
  listening), `up()` brings it back on the same port.
- `signed(body)`: the headers the Events API would send with `body` (v0 HMAC-SHA256).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_TOKEN = "xoxb-fake-bot-token-1234"
APP_TOKEN = "xapp-fake-app-token-5678"
SIGNING_SECRET = "fake-signing-secret-9abc"
TEAM = "T0FAKE"
BOT_USER = "UBOT"


@dataclass
class FakeSlack:
    bot_token: str = BOT_TOKEN
    app_token: str = APP_TOKEN
    port: int = 0
    posted: list[dict[str, Any]] = field(default_factory=list)  # chat.postMessage bodies
    updated: list[dict[str, Any]] = field(default_factory=list)  # chat.update bodies
    views: list[dict[str, Any]] = field(default_factory=list)  # views.open bodies
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)  # file id -> upload
    completed: list[dict[str, Any]] = field(default_factory=list)
    private_files: dict[str, bytes] = field(default_factory=dict)  # name -> bytes
    acks: dict[str, dict[str, Any]] = field(default_factory=dict)  # envelope id -> ack
    connections: int = 0  # Socket Mode connections accepted so far
    calls: list[str] = field(default_factory=list)  # Web API methods called, in order

    def __post_init__(self) -> None:
        self._sockets: set[web.WebSocketResponse] = set()
        self._acked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._runner: web.AppRunner | None = None
        self._ts = 1700000000
        self.changed = asyncio.Condition()

    # ------------------------------------------------------------ lifecycle
    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def file_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/files/{name}"

    async def up(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/link", self._link)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files/{name}", self._file)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        if not self.port:
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def down(self) -> None:
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------ what the test does
    async def push(
        self, kind: str, payload: dict[str, Any], *, timeout: float = 30
    ) -> dict[str, Any]:
        """Send an envelope over the live socket; the client's ack."""
        envelope_id = str(uuid.uuid4())
        acked = self._acked[envelope_id] = asyncio.get_running_loop().create_future()
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
        }
        async with asyncio.timeout(timeout):
            while not self._sockets:
                await asyncio.sleep(0.01)
        await next(iter(self._sockets)).send_str(json.dumps(envelope))
        async with asyncio.timeout(timeout):
            return await acked

    async def wait(self, check: Any, *, timeout: float = 60) -> None:
        """Until `check()` is true (checked at every change the fake sees)."""
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(check)

    def event(self, event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
        """An event_callback body around `event`."""
        return {
            "token": "legacy",
            "team_id": TEAM,
            "api_app_id": "A0FAKE",
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
        }

    def next_ts(self) -> str:
        self._ts += 1
        return f"{self._ts}.000100"

    # ------------------------------------------------------------ the wire
    async def _touched(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def _body(self, request: web.Request) -> dict[str, Any]:
        values: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            values.update(await request.json())
        elif request.can_read_body:
            values.update(dict(await request.post()))
        return values

    def _bearer(self, request: web.Request, body: dict[str, Any]) -> str:
        header = request.headers.get("Authorization", "")
        return header.removeprefix("Bearer ") if header else str(body.get("token") or "")

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        body = await self._body(request)
        token = self._bearer(request, body)
        self.calls.append(method)
        if method == "apps.connections.open":
            if token != self.app_token:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            return web.json_response({"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"})
        if token != self.bot_token:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        answer = await self._method(method, body)
        await self._touched()
        return web.json_response(answer)

    async def _method(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "user_id": BOT_USER, "team_id": TEAM, "bot_id": "B0FAKE"}
        if method == "chat.postMessage":
            if not body.get("channel"):
                return {"ok": False, "error": "channel_not_found"}
            if isinstance(body.get("blocks"), str):
                body["blocks"] = json.loads(body["blocks"])
            ts = self.next_ts()
            self.posted.append({**body, "_ts": ts})
            return {"ok": True, "channel": body["channel"], "ts": ts, "message": {"ts": ts}}
        if method == "chat.update":
            self.updated.append(body)
            return {"ok": True, "channel": body.get("channel"), "ts": body.get("ts")}
        if method == "views.open":
            view = body.get("view")
            view = json.loads(view) if isinstance(view, str) else view
            if not body.get("trigger_id") or not isinstance(view, dict):
                return {"ok": False, "error": "invalid_arguments"}
            self.views.append({**body, "view": view})
            return {"ok": True, "view": {**view, "id": f"V{len(self.views):04d}"}}
        if method == "files.getUploadURLExternal":
            file_id = f"F{len(self.uploads) + 1:04d}"
            self.uploads[file_id] = {"filename": body.get("filename"), "length": body["length"]}
            url = f"http://127.0.0.1:{self.port}/upload/{file_id}"
            return {"ok": True, "upload_url": url, "file_id": file_id}
        if method == "files.completeUploadExternal":
            files = body.get("files")
            files = json.loads(files) if isinstance(files, str) else files
            self.completed.append({**body, "files": files})
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in files]}
        return {"ok": False, "error": "unknown_method"}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self.uploads:
            return web.Response(status=404)
        data = await request.read()
        if request.content_type.startswith("multipart/"):  # the SDK posts the bytes raw
            return web.Response(status=400, text="expected the raw bytes")
        self.uploads[file_id]["data"] = data
        await self._touched()
        return web.Response(text=f"OK - {len(data)}")

    async def _file(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(status=403)
        data = self.private_files.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.add(socket)
        self.connections += 1
        await socket.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": len(self._sockets),
                    "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
                    "connection_info": {"app_id": "A0FAKE"},
                }
            )
        )
        await self._touched()
        try:
            async for message in socket:
                if message.type != WSMsgType.TEXT:
                    continue
                ack = json.loads(message.data)
                envelope_id = ack.get("envelope_id")
                self.acks[envelope_id] = ack
                waiting = self._acked.pop(envelope_id, None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(ack)
        finally:
            self._sockets.discard(socket)
            await self._touched()
        return socket


def signed(body: bytes, *, secret: str = SIGNING_SECRET, at: int | None = None) -> dict[str, str]:
    """The headers Slack sends with an Events API request (the v0 signature)."""
    stamp = str(int(time.time()) if at is None else at)
    base = b"v0:" + stamp.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


@contextlib.contextmanager
def fake_slack_in_thread() -> Iterator[tuple[FakeSlack, Callable[[Any], Any]]]:
    """A FakeSlack on its own event loop in a thread (for a test whose app runs in
    another loop, a TestClient's); yields it and `run(coroutine)`, which runs a coroutine
    there and returns its result."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(60)

    fake = FakeSlack()
    run(fake.up())
    try:
        yield fake, run
    finally:
        run(fake.down())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
