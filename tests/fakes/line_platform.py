"""A fake LINE platform on loopback, speaking the Messaging API's wire format (the shapes of
developers.line.biz/en/reference/messaging-api and of line-bot-sdk's models), and the
webhook bodies LINE posts, signed the way LINE signs them.

`FakeLine` serves the API host (`/v2/bot/info`, `/v2/bot/message/reply`, `/push`,
`/v2/bot/chat/loading/start`) and, on a second port, the content host
(`/v2/bot/message/{id}/content`). It checks the bearer token, takes each reply token once
and each `X-Line-Retry-Key` once (409 the second time, as LINE does), and records every
call. `down = True` makes every call a 503; `throttle = n` answers the next n calls 429;
`lose_answers = n` delivers the next n pushes but answers them 500 (a lost answer).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.ports import free_port
from tests.fakes.threaded_server import serve_in_thread

TOKEN = "fake-line-access-token-0123456789"
SECRET = "fake-line-channel-secret"
BOT_ID = "U0000000000000000000000000000b0t"


@dataclass
class Call:
    host: str  # "api" or "data"
    method: str
    path: str
    body: Any
    headers: dict[str, str]


@dataclass
class FakeLine:
    calls: list[Call] = field(default_factory=list)
    reply_tokens: set[str] = field(default_factory=set)  # issued, not yet used
    retry_keys: set[str] = field(default_factory=set)
    contents: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # id -> bytes, type
    down: bool = False
    throttle: int = 0
    lose_answers: int = 0  # pushes taken whose answer is lost (a 500 after delivering)
    lock: threading.Lock = field(default_factory=threading.Lock)
    api_url: str = ""
    data_url: str = ""

    # ------------------------------------------------------------ what the tests read
    def sent(self, kind: str) -> list[Call]:
        """The accepted calls to /v2/bot/message/<kind> (reply or push)."""
        return [c for c in self.calls if c.path == f"/v2/bot/message/{kind}" and c.body]

    def texts(self, kind: str) -> list[str]:
        return [m["text"] for c in self.sent(kind) for m in c.body["messages"]]

    def wait(self, done: Callable[[], bool], secs: float = 60) -> None:
        deadline = time.monotonic() + secs
        while not done():
            assert time.monotonic() < deadline, f"not done in {secs} s; calls: {self.calls}"
            time.sleep(0.01)

    def issue_token(self) -> str:
        token = uuid.uuid4().hex
        self.reply_tokens.add(token)
        return token

    # ------------------------------------------------------------ the apps
    def app(self, host: str) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def record(request: Request, call_next: Any) -> Any:
            raw = await request.body()
            body = json.loads(raw) if raw and request.method == "POST" else None
            if request.headers.get("authorization") != f"Bearer {TOKEN}":
                return JSONResponse({"message": "Authentication failed"}, status_code=401)
            if self.down:
                self.calls.append(Call(host, request.method, request.url.path, None, {}))
                return JSONResponse({"message": "Service unavailable"}, status_code=503)
            with self.lock:
                if self.throttle > 0:
                    self.throttle -= 1
                    self.calls.append(Call(host, request.method, request.url.path, None, {}))
                    return JSONResponse(
                        {"message": "The API rate limit has been exceeded."},
                        status_code=429,
                        headers={"Retry-After": "0"},
                    )
            request.state.body = body
            response = await call_next(request)
            if response.status_code < 300:
                self.calls.append(
                    Call(host, request.method, request.url.path, body, dict(request.headers))
                )
            return response

        if host == "api":

            @app.get("/v2/bot/info")
            async def info() -> dict[str, str]:
                return {
                    "userId": BOT_ID,
                    "basicId": "@123crab",
                    "displayName": "Crab",
                    "chatMode": "bot",
                    "markAsReadMode": "auto",
                }

            @app.post("/v2/bot/message/reply")
            async def reply(request: Request) -> Response:
                body = request.state.body
                with self.lock:
                    if body["replyToken"] not in self.reply_tokens:
                        return JSONResponse({"message": "Invalid reply token"}, status_code=400)
                    self.reply_tokens.discard(body["replyToken"])
                return _sent(body)

            @app.post("/v2/bot/message/push")
            async def push(request: Request) -> Response:
                body = request.state.body
                key = request.headers.get("x-line-retry-key")
                with self.lock:
                    if key in self.retry_keys:
                        return JSONResponse(
                            {"message": "The retry key is already accepted"}, status_code=409
                        )
                    if key:
                        self.retry_keys.add(key)
                    if self.lose_answers > 0:
                        self.lose_answers -= 1
                        headers = dict(request.headers)
                        self.calls.append(Call(host, "POST", request.url.path, body, headers))
                        return JSONResponse({"message": "Internal error"}, status_code=500)
                return _sent(request.state.body)

            @app.post("/v2/bot/chat/loading/start")
            async def loading() -> Response:
                return JSONResponse({}, status_code=202)

        else:

            @app.get("/v2/bot/message/{message_id}/content")
            async def content(message_id: str) -> Response:
                if message_id not in self.contents:
                    return JSONResponse({"message": "Not found"}, status_code=404)
                data, media_type = self.contents[message_id]
                return Response(data, media_type=media_type)

        return app


def _sent(body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(
        {
            "sentMessages": [
                {"id": str(uuid.uuid4().int)[:18], "quoteToken": uuid.uuid4().hex}
                for _ in body["messages"]
            ]
        }
    )


@contextmanager
def fake_line() -> Iterator[FakeLine]:
    """The fake API and content hosts, served until the block ends."""
    line = FakeLine()
    with ExitStack() as stack:
        line.api_url = stack.enter_context(serve_in_thread(line.app("api"), free_port()))
        line.data_url = stack.enter_context(serve_in_thread(line.app("data"), free_port()))
        yield line


# ---------------------------------------------------------------- webhook bodies
def sign(body: bytes, secret: str = SECRET) -> str:
    """`X-Line-Signature` as LINE computes it."""
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def webhook(*events: dict[str, Any]) -> bytes:
    return json.dumps({"destination": BOT_ID, "events": list(events)}).encode("utf-8")


def _event(kind: str, source: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "mode": "active",
        "timestamp": int(time.time() * 1000),
        "source": source,
        "webhookEventId": "01" + uuid.uuid4().hex[:24].upper(),
        "deliveryContext": {"isRedelivery": False},
        **fields,
    }


def user(user_id: str) -> dict[str, Any]:
    return {"type": "user", "userId": user_id}


def group(group_id: str, user_id: str) -> dict[str, Any]:
    return {"type": "group", "groupId": group_id, "userId": user_id}


def text_event(
    source: dict[str, Any],
    text: str,
    *,
    reply_token: str,
    message_id: str | None = None,
    mentions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": message_id or str(uuid.uuid4().int)[:18],
        "type": "text",
        "text": text,
        "quoteToken": uuid.uuid4().hex,
    }
    if mentions is not None:
        message["mention"] = {"mentionees": mentions}
    return _event("message", source, replyToken=reply_token, message=message)


def image_event(source: dict[str, Any], message_id: str, *, reply_token: str) -> dict[str, Any]:
    message = {
        "id": message_id,
        "type": "image",
        "contentProvider": {"type": "line"},
        "quoteToken": uuid.uuid4().hex,
    }
    return _event("message", source, replyToken=reply_token, message=message)


def postback_event(source: dict[str, Any], data: str, *, reply_token: str) -> dict[str, Any]:
    return _event("postback", source, replyToken=reply_token, postback={"data": data})
