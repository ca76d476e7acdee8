"""A fake Telegram Bot API on 127.0.0.1, speaking the documented wire format
(https://core.telegram.org/bots/api): `POST /bot<token>/<method>` with form-encoded or
multipart parameters (complex ones JSON-encoded, as the SDKs send them), answered with
`{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description",
"parameters"}`; files come down from `GET /file/bot<token>/<file_path>`.

Served by uvicorn from a thread (`FakeTelegram.serving()`), so python-telegram-bot talks to
it over a real socket. A test queues updates (`message`, `callback`), reads what the bot
called (`calls`, `wait_for`), and can take the platform down (`down = True`: every call
is a 502) or rate-limit one method once (`limit_once`: a 429 with retry_after).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.ports import free_port
from tests.fakes.threaded_server import serve_in_thread

TOKEN = "123456:TEST-token_abcdefghijklmnopqrstuvw"
BOT = {"id": 999000, "is_bot": True, "first_name": "Crab", "username": "crab_bot"}
JSON_PARAMETERS = {"reply_markup", "reply_parameters", "allowed_updates", "entities"}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # field -> (name, data)


@dataclass
class FakeTelegram:
    token: str = TOKEN
    down: bool = False
    calls: list[Call] = field(default_factory=list)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # file_id -> path, bytes
    limited: dict[str, int] = field(default_factory=dict)  # method -> retry_after, once
    webhook: dict[str, Any] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)  # the messages the bot sent
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _messages: Iterator[int] = field(default_factory=lambda: itertools.count(5000))
    url: str = ""
    _wake: asyncio.Event | None = None  # set in the server's loop when an update comes
    _loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------ the test's side
    @contextmanager
    def serving(self) -> Iterator[FakeTelegram]:
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._method, methods=["POST", "GET"]),
                Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
            ]
        )
        with serve_in_thread(app, free_port()) as url:
            self.url = url
            yield self

    def chat(self, chat_id: int, kind: str = "private", title: str | None = None) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": kind}
        if title:
            chat["title"] = title
        self._chats[chat_id] = chat
        return chat

    def user(
        self, user_id: int, username: str | None = None, *, bot: bool = False
    ) -> dict[str, Any]:
        user: dict[str, Any] = {"id": user_id, "is_bot": bot, "first_name": f"U{user_id}"}
        if username:
            user["username"] = username
        return user

    def message(
        self,
        text: str | None,
        *,
        chat: dict[str, Any],
        user: dict[str, Any],
        reply_to: dict[str, Any] | None = None,
        document: dict[str, Any] | None = None,
        caption: str | None = None,
        photo: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Queue a `message` update (mentions of @names get their entities); returns it."""
        message: dict[str, Any] = {
            "message_id": next(self._messages),
            "date": int(time.time()),
            "chat": chat,
            "from": user,
        }
        if text is not None:
            message["text"] = text
            entities = _mentions(text)
            if text.startswith("/"):
                entities.insert(
                    0, {"type": "bot_command", "offset": 0, "length": len(text.split()[0])}
                )
            if entities:
                message["entities"] = entities
        if caption is not None:
            message["caption"] = caption
            if entities := _mentions(caption):
                message["caption_entities"] = entities
        if photo is not None:
            message["photo"] = photo
        if document is not None:
            message["document"] = document
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        self.push({"message": message})
        return message

    def document(
        self, name: str, data: bytes, mime: str = "application/octet-stream"
    ) -> dict[str, Any]:
        """A document the platform holds (what getFile and the file URL serve)."""
        file_id = f"doc{len(self.files) + 1}"
        self.files[file_id] = (f"documents/file_{len(self.files) + 1}.bin", data)
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_name": name,
            "mime_type": mime,
            "file_size": len(data),
        }

    def photo(self, *sizes: bytes) -> list[dict[str, Any]]:
        """A photo in the sizes Telegram keeps (smallest first), as a message carries it."""
        shown = []
        for number, data in enumerate(sizes, 1):
            file_id = f"photo{len(self.files) + 1}"
            self.files[file_id] = (f"photos/file_{len(self.files) + 1}.jpg", data)
            side = 90 * number
            shown.append(
                {
                    "file_id": file_id,
                    "file_unique_id": f"u{file_id}",
                    "width": side,
                    "height": side,
                    "file_size": len(data),
                }
            )
        return shown

    def callback(self, data: str, *, message: dict[str, Any], user: dict[str, Any]) -> None:
        """Queue a `callback_query`: `user` pressed the button `data` under `message`."""
        self.push(
            {
                "callback_query": {
                    "id": f"cq{next(self._ids)}",
                    "from": user,
                    "message": message,
                    "chat_instance": "ci1",
                    "data": data,
                }
            }
        )

    def push(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            update = {"update_id": 700000 + next(self._ids), **body}
            self._updates.append(update)
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:  # a long poll waiting answers at once
            with contextlib.suppress(RuntimeError):  # the server has stopped
                loop.call_soon_threadsafe(wake.set)
        return update

    def of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, count: int = 1, *, timeout: float = 60) -> list[Call]:
        """The first `count` calls of `method`, once there are that many."""
        async with asyncio.timeout(timeout):
            while len(found := self.of(method)) < count:
                await asyncio.sleep(0.01)
        return found

    def limit_once(self, method: str, retry_after: int = 1) -> None:
        self.limited[method] = retry_after

    # ------------------------------------------------------------ the Bot API's side
    async def _method(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        if self.down:
            return Response("Bad Gateway", status_code=502)
        method = request.path_params["method"]
        params, files = await _params(request)
        retry = self.limited.pop(method, None)
        if retry is not None:
            return _error(429, f"Too Many Requests: retry after {retry}", retry_after=retry)
        with self._lock:
            self.calls.append(Call(method, params, files))
        handler = getattr(self, f"_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result = await handler(params, files)
        if isinstance(result, Response):
            return result
        return JSONResponse({"ok": True, "result": result})

    async def _file(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response(status_code=401)
        for path, data in self.files.values():
            if path == request.path_params["path"]:
                return Response(data, media_type="application/octet-stream")
        return Response(status_code=404)

    async def _getMe(self, params: dict[str, Any], files: Any) -> Any:
        return BOT

    async def _getUpdates(self, params: dict[str, Any], files: Any) -> Any:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while True:
            with self._lock:
                if self._wake is None:
                    self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
                wake = self._wake
                wake.clear()
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
                ready = list(self._updates[: int(params.get("limit") or 100)])
            left = deadline - time.monotonic()
            if ready or left <= 0 or self.down:
                return ready
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(left, 0.2))

    def _sent(self, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        message: dict[str, Any] = {
            "message_id": next(self._messages),
            "date": int(time.time()),
            "chat": self._chats.get(chat_id, {"id": chat_id, "type": "private"}),
            "from": BOT,
            **extra,
        }
        if "inline_keyboard" in params.get("reply_markup", {}):  # a message keeps no other
            message["reply_markup"] = params["reply_markup"]
        self.sent.append(message)
        return message

    async def _sendMessage(self, params: dict[str, Any], files: Any) -> Any:
        if len(params["text"].encode("utf-16-le")) // 2 > 4096:
            return _error(400, "Bad Request: message is too long")
        return self._sent(params, text=params["text"])

    async def _sendChatAction(self, params: dict[str, Any], files: Any) -> Any:
        return True

    async def _answerCallbackQuery(self, params: dict[str, Any], files: Any) -> Any:
        return True

    async def _editMessageReplyMarkup(self, params: dict[str, Any], files: Any) -> Any:
        return self._sent(params, text="(edited)")

    async def _getFile(self, params: dict[str, Any], files: Any) -> Any:
        file_id = params["file_id"]
        if file_id not in self.files:
            return _error(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    async def _sendDocument(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        if "document" not in files:
            return _error(400, "Bad Request: there is no document in the request")
        name, data = files["document"]
        return self._sent(
            params,
            document={
                "file_id": "sent1",
                "file_unique_id": "usent1",
                "file_name": name,
                "file_size": len(data),
            },
        )

    async def _setWebhook(self, params: dict[str, Any], files: Any) -> Any:
        self.webhook = {"url": params["url"], "secret_token": params.get("secret_token")}
        return True

    async def _getWebhookInfo(self, params: dict[str, Any], files: Any) -> Any:
        return {
            "url": self.webhook.get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": 0,
        }

    async def _deleteWebhook(self, params: dict[str, Any], files: Any) -> Any:
        self.webhook = {}
        return True


def _mentions(text: str) -> list[dict[str, Any]]:
    entities = []
    at = 0
    for word in text.split(" "):
        if word.startswith("@") and len(word) > 1:
            entities.append(
                {
                    "type": "mention",
                    "offset": len(text[:at].encode("utf-16-le")) // 2,
                    "length": len(word),
                }
            )
        at += len(word) + 1
    return entities


async def _params(request: Request) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    params: dict[str, Any] = {}
    files: dict[str, tuple[str, bytes]] = {}
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/json"):
        return dict(await request.json()), files
    form = await request.form()
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            files[key] = (value.filename or "", await value.read())
        elif key in JSON_PARAMETERS:
            params[key] = json.loads(value)
        else:
            params[key] = value
    # a file sent by reference: "attach://<name>" names the multipart part
    for key, value in list(params.items()):
        if isinstance(value, str) and value.startswith("attach://"):
            part = value.removeprefix("attach://")
            if part in files:
                files[key] = files.pop(part)
    return params, files


def _error(code: int, description: str, **parameters: Any) -> Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, status_code=code)
