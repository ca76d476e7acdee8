"""The LINE gateway: the Messaging API's webhook in, reply and push messages out, on the
official line-bot-sdk (v3: its async messaging client, its webhook event models).

Configured by `[gateway.line]` (`LineConfig`, a `PlatformConfig`: allow-lists, an agent
per chat, the typing indicator): the channel secret and a long-lived channel access
token (from `${LINE_CHANNEL_SECRET}` and `${LINE_CHANNEL_ACCESS_TOKEN}`).

- In: LINE posts each webhook to `POST /hooks/line` on the HTTP server. The route
  checks `X-Line-Signature` (HMAC-SHA256 of the raw body with the channel secret,
  base64, compared in constant time) before it reads anything else of the request: a
  missing or wrong one is 401 and nothing is kept. The events are taken in and the route
  answers 200 at once; the turns run after. An event seen already (its `webhookEventId`:
  LINE redelivers an event it thinks was lost, with `deliveryContext.isRedelivery`) is
  dropped. A text message from a person in a 1:1 chat, or in a group or room when it
  mentions the bot (`mention.mentionees[].isSelf`), reaches the agent if the allow-lists
  allow its sender or its chat; an image or a file is fetched from the content API into
  the agent's workspace (the jail and the quota as for any write) under `line/` and the
  turn's message names it. A postback (a quick-reply button pressed) decides what it
  says (`platform.press`) and is answered with the outcome.
- Out: a reply uses the event's reply token while it is still good (once, within
  `reply_token_secs`), else a push message; the text is split at LINE's 5,000-character
  limit on sentence ends (Japanese 。 too), five message objects per call, the rest
  pushed. A message asking a person (a held call, the inbox's approvals) carries quick
  replies: postback buttons for approve and deny. In a 1:1 chat the loading animation
  shows while the turn runs (`typing = true`). Any chat id (a user, a group, a room) can
  be an agent's heartbeat home or the alert outlet: those are push messages.
- The link: the access token is checked with a bot-info call at connect; a call that
  fails for the platform's sake (no answer, 5xx) marks the link down and checks it
  again with backoff (`connection.state` is what the dashboard shows); sends are retried
  with backoff under the same `X-Line-Retry-Key` (LINE sends a push once per key),
  a 429 waits its `Retry-After`. Nothing else waits for LINE.

Sending a file out would need a public HTTPS URL for LINE to fetch it from: OpenCrab
does not serve one, so replies are text (the agent can name a workspace file).

The webhook arrives in the HTTP server's process: the gateway runs in the server role's
"chat-gateways" service (opencrab.process) and the route finds it in `runtime.outlets`;
a server without HTTP (`[gateway.rest] enabled = false`) cannot take LINE's webhook and
says so at start. `linebot` is imported only when the gateway is built (the `line` extra).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import hmac
import logging
import mimetypes
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import SecretStr

from opencrab.core.workspace import Workspace
from opencrab.errors import ConfigError, OpenCrabError, QuotaExceeded
from opencrab.gateway.base import GatewayConfig
from opencrab.gateway.configs import LineConfig
from opencrab.gateway.platform import Connection, buttons_for, press, split_text
from opencrab.gateway.serve import ChatGateway, agent_for
from opencrab.messages import (
    Attachment,
    Channel,
    ChatSource,
    IncomingMessage,
    MessageContent,
    OutgoingMessage,
    Sender,
)
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl

log = logging.getLogger(__name__)

NAME = "line"
MESSAGE_LIMIT = 5000  # characters in one text message object (counted as UTF-16 units)
MESSAGES_PER_CALL = 5  # message objects in one reply or push
QUEUE_SIZE = 1000
SEEN_EVENTS = 10_000  # webhook event ids remembered to drop redeliveries
LOADING_SECS = 60  # the loading animation's longest run; a message sent ends it
SIGNATURE = "x-line-signature"
T = TypeVar("T")


def signature_of(body: bytes, secret: str) -> str:
    """LINE's `X-Line-Signature` of a webhook body: base64 HMAC-SHA256 with the secret."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_matches(body: bytes, signature: str, secret: str) -> bool:
    """Whether `signature` is the body's, compared in constant time."""
    return hmac.compare_digest(signature.encode("utf-8"), signature_of(body, secret).encode())


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class LineApiDown(Exception):
    """The Messaging API did not answer, or answered with a server error."""


@dataclass
class _ReplyToken:
    token: str
    good_until: float  # time.monotonic()


class LineGateway(ChatGateway):
    """LINE chats (1:1, groups, rooms) as conversations; see the module docstring."""

    name: ClassVar[str] = NAME
    config_model: ClassVar[type[GatewayConfig]] = LineConfig

    def __init__(self, config: LineConfig, *, runtime: Any) -> None:
        super().__init__(config)
        self.settings = config
        self.runtime = runtime
        self.secret = _secret(config.channel_secret, "channel_secret", "LINE_CHANNEL_SECRET")
        self.token = _secret(
            config.channel_access_token, "channel_access_token", "LINE_CHANNEL_ACCESS_TOKEN"
        )
        self.queue: asyncio.Queue[IncomingMessage] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.replies: dict[str, _ReplyToken] = {}  # incoming message id -> its reply token
        self.bot_name: str | None = None
        self.connection = Connection(
            NAME,
            self._session,
            first=config.retry_first_secs,
            cap=config.retry_cap_secs,
            scrub=self._scrub,
        )
        self._down = asyncio.Event()  # an API call failed for the platform's sake
        self._tasks: set[asyncio.Task[Any]] = set()
        self._api: Any = None  # linebot AsyncMessagingApi
        self._blob: Any = None  # linebot AsyncMessagingApiBlob
        self._clients: list[Any] = []

    @classmethod
    def from_config(cls, runtime: Any, config: Any, **options: Any) -> Self | None:
        if not config.enabled:
            return None
        return cls(config, runtime=runtime)

    # ------------------------------------------------------------ the Gateway trait
    async def connect(self) -> None:
        """Open the SDK's clients and check the link in the background: a LINE that cannot
        be reached holds nothing up (its state says so and it is tried again)."""
        from linebot.v3.messaging import (
            AsyncApiClient,
            AsyncMessagingApi,
            AsyncMessagingApiBlob,
            Configuration,
        )

        api = AsyncApiClient(Configuration(host=self.settings.api_url, access_token=self.token))
        data = AsyncApiClient(Configuration(host=self.settings.data_url, access_token=self.token))
        self._clients = [api, data]
        self._api, self._blob = AsyncMessagingApi(api), AsyncMessagingApiBlob(data)
        self.connection.start()

    async def disconnect(self) -> None:
        await self.connection.stop()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for client in self._clients:
            await client.close()
        self._clients = []

    async def receive(self) -> IncomingMessage:
        message = await self.queue.get()
        chat = self.conversation_key(message)
        if self.settings.typing and chat.startswith("U"):  # 1:1 chats only
            self._spawn(self._loading(chat))
        return message

    async def send(self, message: OutgoingMessage) -> None:
        """Reply with the reply token of the message answered while it is good, else push;
        at most five message objects per call, the quick replies on the last one."""
        chat = message.target.channel_id
        if not chat:
            raise ValueError("a LINE message needs a target chat (a user, group or room id)")
        objects = self._objects(message)
        if not objects:
            return
        held = self.replies.pop(message.reply_to, None) if message.reply_to else None
        if held is not None and time.monotonic() < held.good_until:
            first, objects = objects[:MESSAGES_PER_CALL], objects[MESSAGES_PER_CALL:]
            if not await self._reply(held.token, first):
                objects = first + objects  # the token was refused: push it all
        for start in range(0, len(objects), MESSAGES_PER_CALL):
            await self._push(chat, objects[start : start + MESSAGES_PER_CALL])

    # ------------------------------------------------------------ conversations
    def agent(self) -> str | None:
        return self.settings.agent

    def agent_for_message(self, message: IncomingMessage) -> str | None:
        return self.settings.agent_of(self.conversation_key(message))

    # ------------------------------------------------------------ the webhook
    def verify(self, body: bytes, signature: str | None) -> bool:
        return bool(signature) and signature_matches(body, signature or "", self.secret)

    def take(self, body: bytes) -> int:
        """Take a verified webhook body in: events seen before are dropped, the rest are
        handled in the background. Returns how many events are new; ValueError when the
        body is not a webhook's."""
        from linebot.v3.webhook import WebhookParser

        parser = WebhookParser(self.secret, skip_signature_verification=lambda: True)
        try:
            events = parser.parse(body.decode("utf-8"), "")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise ValueError(f"not a LINE webhook body ({type(exc).__name__})") from exc
        new = 0
        for event in events:
            event_id = getattr(event, "webhook_event_id", None)
            if event_id:
                if event_id in self.seen:
                    continue  # a redelivery of an event handled already
                self.seen[event_id] = None
                if len(self.seen) > SEEN_EVENTS:
                    self.seen.popitem(last=False)
            new += 1
            self._event(event)
        return new

    def _event(self, event: Any) -> None:
        from linebot.v3.webhooks import (
            FileMessageContent,
            ImageMessageContent,
            MessageEvent,
            PostbackEvent,
            TextMessageContent,
        )

        if str(getattr(event.mode, "value", event.mode)) != "active":
            return  # standby: another channel's module answers
        where = _where(event.source)
        if where is None:
            return
        user, chat = where
        work: Callable[[], Awaitable[None]] | None = None
        if isinstance(event, PostbackEvent):
            work = functools.partial(self._pressed, event, user)
        elif isinstance(event, MessageEvent):
            content = event.message
            if isinstance(content, TextMessageContent):
                text = content.text
                if not chat.startswith("U"):  # a group or room: only when it mentions the bot
                    mentioned = _mentions_of(content)
                    if not any(getattr(m, "is_self", False) for m in mentioned):
                        return
                    text = _without_mentions(text, mentioned)
                work = functools.partial(self._enqueue_text, event, user, chat, text)
            elif isinstance(content, ImageMessageContent | FileMessageContent) and chat.startswith(
                "U"
            ):  # 1:1 only: a group's file mentions nobody
                work = functools.partial(self._fetch, event, user, chat)
        if work is None:
            return
        if not self.settings.allows(user, chat):
            log.warning(
                "line: not answering %s in chat %s: neither is in gateway.line allow_users "
                "or allow_channels",
                user or "someone",
                chat,
            )
            return
        self._spawn(work())

    async def _enqueue_text(self, event: Any, user: str, chat: str, text: str) -> None:
        self._enqueue(self._incoming(event, user, chat, text))

    def _incoming(
        self,
        event: Any,
        user: str,
        chat: str,
        text: str,
        attachments: list[Attachment] | None = None,
    ) -> IncomingMessage:
        message = IncomingMessage(
            id=str(event.message.id),
            source=ChatSource(gateway=NAME, conversation=chat),
            content=MessageContent(text=text, attachments=attachments or []),
            sender=Sender(id=user or chat),
            channel=Channel(id=chat),
        )
        if event.reply_token:
            self._keep_token(message.id, event.reply_token)
        return message

    def _keep_token(self, message_id: str, token: str) -> None:
        now = time.monotonic()
        for key in [k for k, held in self.replies.items() if held.good_until <= now]:
            del self.replies[key]  # the stale ones go as new ones come
        self.replies[message_id] = _ReplyToken(token, now + self.settings.reply_token_secs)

    def _enqueue(self, message: IncomingMessage) -> None:
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.replies.pop(message.id, None)
            log.warning("line: %d messages waiting; dropped %s", QUEUE_SIZE, message.id)

    async def _pressed(self, event: Any, user: str) -> None:
        said = await press(self.runtime, event.postback.data, by=f"line:{user}")
        from linebot.v3.messaging import TextMessage

        objects = [TextMessage(text=said)]
        if not (event.reply_token and await self._reply(event.reply_token, objects)):
            chat = _where(event.source)
            if chat is not None:
                await self._push(chat[1], objects)

    async def _fetch(self, event: Any, user: str, chat: str) -> None:
        """An image or a file: its bytes from the content API into the workspace of the
        agent answering this chat, then the turn's message naming where it is."""
        from linebot.v3.messaging import ApiException

        content = event.message
        try:
            agent = await run_blocking(agent_for, self.runtime, self.settings.agent_of(chat), NAME)
            ws = Workspace.for_agent(self.runtime.settings, agent.id)
            size = getattr(content, "file_size", None)  # a file says its size: none to fetch
            if isinstance(size, int) and size > ws.max_size_bytes:
                raise QuotaExceeded(f"{size} bytes are over the workspace quota")
            data = await self._call(
                lambda: self._blob.get_message_content(
                    content.id, _request_timeout=self.settings.request_timeout_secs
                ),
                "content",
            )
            path = f"line/{_file_name(content)}"
            await run_blocking(ws.write, path, bytes(data))
        except (OpenCrabError, LineApiDown, ApiException) as exc:
            if isinstance(exc, OpenCrabError):
                why = exc.code
            elif isinstance(exc, LineApiDown):
                why = "LINE could not be reached"
            else:
                why = f"LINE answered {_status(exc)}"
            text = f"(I could not keep the {content.type} you sent: {why}.)"
            self._enqueue(self._incoming(event, user, chat, text))
            return
        noun = "an image" if content.type == "image" else "a file"
        text = f"I sent you {noun}; it is in your workspace at {path}."
        attachment = Attachment(
            url=f"workspace:{path}", name=path.rsplit("/", 1)[-1], content_type=_type_of(path)
        )
        self._enqueue(self._incoming(event, user, chat, text, [attachment]))

    # ------------------------------------------------------------ the Messaging API
    def _objects(self, message: OutgoingMessage) -> list[Any]:
        from linebot.v3.messaging import PostbackAction, QuickReply, QuickReplyItem, TextMessage

        pieces = split_text(message.content.text, MESSAGE_LIMIT, measure=utf16_len)
        buttons = buttons_for(message)
        quick = QuickReply(
            items=[
                QuickReplyItem(
                    action=PostbackAction(label=b.label, data=b.id, display_text=b.label)
                )
                for b in buttons
            ]
        )
        last = len(pieces) - 1
        return [
            TextMessage(text=piece, quick_reply=quick if buttons and n == last else None)
            for n, piece in enumerate(pieces)
        ]

    async def _reply(self, token: str, objects: list[Any]) -> bool:
        """Reply with `token`; False when LINE refused the token (used, expired)."""
        from linebot.v3.messaging import ApiException, ReplyMessageRequest

        request = ReplyMessageRequest(reply_token=token, messages=objects)
        try:
            await self._call(
                lambda: self._api.reply_message(
                    request, _request_timeout=self.settings.request_timeout_secs
                ),
                "reply",
                attempts=1,  # a reply token is good once: a lost answer is pushed instead
            )
        except (ApiException, LineApiDown) as exc:
            log.info("line: reply token not taken (%s); pushing", _status(exc))
            return False
        return True

    async def _push(self, chat: str, objects: list[Any]) -> None:
        from linebot.v3.messaging import ApiException, PushMessageRequest

        request = PushMessageRequest(to=chat, messages=objects)
        key = str(uuid.uuid4())  # the same key on every try: LINE delivers it once
        try:
            await self._call(
                lambda: self._api.push_message(
                    request,
                    x_line_retry_key=key,
                    _request_timeout=self.settings.request_timeout_secs,
                ),
                "push",
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            # 409: LINE took this key already (a try whose answer was lost): it was sent

    async def _loading(self, chat: str) -> None:
        from linebot.v3.messaging import ShowLoadingAnimationRequest

        request = ShowLoadingAnimationRequest(chat_id=chat, loading_seconds=LOADING_SECS)
        with contextlib.suppress(Exception):  # only a courtesy: the turn goes on without it
            await self._call(
                lambda: self._api.show_loading_animation(
                    request, _request_timeout=self.settings.request_timeout_secs
                ),
                "loading",
                attempts=1,
            )

    async def _call(
        self, make: Callable[[], Awaitable[T]], what: str, *, attempts: int | None = None
    ) -> T:
        """One Messaging API call, tried `send_attempts` times with backoff: no answer or
        a 5xx also marks the link down (checked again by the connection), a 429 waits its
        Retry-After. A 4xx other than 429 is the request's fault: raised at once."""
        from linebot.v3.messaging import ApiException

        tries = attempts or self.settings.send_attempts
        delay = self.settings.retry_first_secs
        for attempt in range(1, tries + 1):
            try:
                return await make()
            except ApiException as exc:
                status = int(exc.status or 0)
                if status == 429:
                    wait = _retry_after(exc) or delay
                elif status >= 500 or status == 0:
                    self._went_down(f"{what}: HTTP {status}")
                    wait = delay
                else:
                    raise
                failure: Exception = exc
            except (OSError, TimeoutError) as exc:  # aiohttp's connection errors are OSErrors
                self._went_down(f"{what}: {type(exc).__name__}")
                failure, wait = LineApiDown(f"{what}: {type(exc).__name__}"), delay
            except Exception as exc:
                if type(exc).__module__.startswith("aiohttp"):
                    self._went_down(f"{what}: {type(exc).__name__}")
                    failure, wait = LineApiDown(f"{what}: {type(exc).__name__}"), delay
                else:
                    raise
            if attempt == tries:
                raise failure
            await asyncio.sleep(min(wait, self.settings.retry_cap_secs))
            delay = min(delay * 2, self.settings.retry_cap_secs)
        raise AssertionError("unreachable")

    def _went_down(self, why: str) -> None:
        log.warning("line: the Messaging API failed (%s)", why)
        self._down.set()

    async def _session(self) -> None:
        """The link's check: the bot's info with the token (a refused token or no answer
        is a failure, retried with backoff), then wait until a call fails."""
        info = await self._api.get_bot_info(_request_timeout=self.settings.request_timeout_secs)
        self.bot_name = info.display_name
        self._down.clear()
        self.connection.mark_connected()
        await self._down.wait()
        raise LineApiDown("a Messaging API call failed; checking the link again")

    def _scrub(self, text: str) -> str:
        for secret in (self.token, self.secret):
            if secret:
                text = text.replace(secret, "***")
        return text

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("line: a webhook event's work failed")

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


# ---------------------------------------------------------------------- helpers
def _secret(value: SecretStr | None, key: str, env: str) -> str:
    text = value.get_secret_value() if value is not None else ""
    if not text or text.startswith("${"):
        raise ConfigError(
            f"gateway.line.{key} is not set: put it in {env} "
            f'({key} = "${{{env}}}" in the config file)',
            key=f"gateway.line.{key}",
        )
    return text


def _where(source: Any) -> tuple[str, str] | None:
    """(user id, chat id) of an event's source: the chat is the user in a 1:1 chat, the
    group or the room otherwise; None for a source with no chat."""
    kind = getattr(source, "type", None)
    user = getattr(source, "user_id", None) or ""
    if kind == "user" and user:
        return user, user
    if kind == "group":
        return user, source.group_id
    if kind == "room":
        return user, source.room_id
    return None


def _mentions_of(content: Any) -> list[Any]:
    mention = getattr(content, "mention", None)
    return list(getattr(mention, "mentionees", None) or [])


def _without_mentions(text: str, mentioned: list[Any]) -> str:
    """The text with the bot's own mentions cut out (index and length count UTF-16)."""
    units = text.encode("utf-16-le")
    for mentionee in sorted(mentioned, key=lambda m: m.index, reverse=True):
        if getattr(mentionee, "is_self", False):
            start, end = mentionee.index * 2, (mentionee.index + mentionee.length) * 2
            units = units[:start] + units[end:]
    return units.decode("utf-16-le", errors="replace").strip()


_UNSAFE = re.compile(r"[^\w.-]+")


def _file_name(content: Any) -> str:
    """A workspace file name for an image or file message: the message id, and for a
    file its own name made safe (no folders, no control or odd characters)."""
    given = getattr(content, "file_name", None)
    if given:
        safe = _UNSAFE.sub("_", given.replace("\\", "/").rsplit("/", 1)[-1]).strip("._")[:100]
        return f"{content.id}-{safe or 'file'}"
    return f"{content.id}.jpg"  # LINE serves images as JPEG


def _type_of(path: str) -> str | None:
    return mimetypes.guess_type(path)[0]


def _retry_after(exc: Any) -> float | None:
    value = (getattr(exc, "headers", None) or {}).get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def _status(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else type(exc).__name__


# ---------------------------------------------------------------------- the route
router = APIRouter(tags=["Chat platforms"])


@router.post("/hooks/line", include_in_schema=False)
async def line_webhook(request: Request) -> JSONResponse:
    """LINE's webhook: the signature checked first (401), then the events taken in and
    200 at once (their turns run after)."""
    gateway = request.app.state.runtime.outlets.get(NAME) if _has_runtime(request) else None
    if not isinstance(gateway, LineGateway):
        return _refuse(503, "unavailable", "the LINE gateway does not run in this server")
    signature = request.headers.get(SIGNATURE)
    if not signature:
        return _refuse(401, "unauthorized", "no X-Line-Signature")
    body = await request.body()
    if not gateway.verify(body, signature):
        return _refuse(401, "unauthorized", "the X-Line-Signature does not match the body")
    try:
        gateway.take(body)
    except ValueError as exc:
        return _refuse(400, "validation_error", str(exc))
    return JSONResponse({})


def _has_runtime(request: Request) -> bool:
    return getattr(request.app.state, "runtime", None) is not None


def _refuse(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
