"""The Telegram gateway, on python-telegram-bot's `Bot` (the Bot API over httpx).

Configured by `[gateway.telegram]` (opencrab.gateway.configs.TelegramConfig): the bot
token (from `${TELEGRAM_BOT_TOKEN}`), the allow-lists, the agent, the mode.

- The link: long polling (`getUpdates` with the next offset, message and callback_query
  updates only) by default, after `deleteWebhook` so that a bot moved back from webhook
  mode gets its updates again; or `mode = "webhook"`: `setWebhook` with the secret at
  connect, and Telegram POSTs each update to /hooks/telegram (gateway/telegram_webhook.py
  checks the secret header before reading anything and hands the update to `feed`);
  getWebhookInfo every minute sets it again if it went. The link is a `Connection`: the
  platform down is retried with backoff and shown as its state; a 429 waits the
  `retry_after` Telegram names.
- Who is answered: a private chat, or a group message that mentions @thebot or replies to
  one of its messages (with privacy mode on, Telegram sends a bot nothing else), from a
  sender the allow-lists admit (user id or @username, or the chat's id); bots never.
  Others are logged (with their ids, to fill the allow-list) and dropped.
- Commands: `/start` greets, `/agents` lists the agents the chat may pick, `/use <agent>`
  picks one for the chat (kept in `chat_agents`, so it survives a restart). A chat
  pinned in `channel_agents` keeps its configured agent: the configuration wins.
- Replies reply to the message they answer, split at 4,096 UTF-16 units on sentence
  ends; a held call's answer and the inbox's notices carry Approve / Deny inline
  buttons; pressing one decides (`press`), answers the callback with the outcome and
  takes that approval's buttons off the message. A ticket's question in the inbox's
  notices carries an Answer button: pressing it posts a message asking for a reply
  (ForceReply), and an allowed person's reply to that message is the ticket's answer
  (`answer_question`: the ticket resumes).
- Files in: a document or photo is downloaded (getFile, then the file URL) into the
  answering agent's workspace under `files_folder/<chat id>/` through the workspace's
  jail and quota, and the turn's text names where it is. Files out: each path the reply
  writes in backticks (`report.pdf`) that is a file of the agent's workspace is sent
  after the text with sendDocument (at most 5 a reply, each at most `max_file_mb`).
- The token is never logged: a filter on httpx's and the SDK's loggers writes it out
  (httpx logs each request's URL, which holds it), and link errors are scrubbed too.
- "typing…" (sendChatAction) every 4 s from the message's arrival until its reply is
  sent, when `typing = true`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import warnings
from collections import OrderedDict, deque
from datetime import timedelta
from typing import Any, ClassVar

from telegram import (
    Bot,
    CallbackQuery,
    ForceReply,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ChatAction, ChatType, MessageEntityType
from telegram.error import RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from opencrab.core.agent import Agent
from opencrab.core.workspace import Workspace
from opencrab.errors import ConfigError, OpenCrabError
from opencrab.gateway.base import GatewayConfig
from opencrab.gateway.configs import TelegramConfig
from opencrab.gateway.platform import (
    Button,
    Connection,
    answer_question,
    buttons_for,
    press,
    question_of,
    split_text,
)
from opencrab.gateway.serve import ChatGateway, agent_for
from opencrab.messages import (
    Channel,
    ChatSource,
    IncomingMessage,
    MessageContent,
    OutgoingMessage,
    Sender,
)
from opencrab.offload import run_blocking
from opencrab.store.repositories import chat_agents

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096  # Telegram's, in UTF-16 code units
ALLOWED_UPDATES = ("message", "callback_query")
QUEUE_SIZE = 1000
TYPING_EVERY = 4.0  # Telegram shows "typing…" for 5 s
TYPING_FOR_AT_MOST = 600.0
FILES_PER_REPLY = 5
WEBHOOK_CHECK_EVERY = 60.0  # seconds between getWebhookInfo checks, in webhook mode
SEEN_UPDATES = 2000
ASKING_AT_MOST = 1000  # "reply with your answer" messages remembered
LOGGERS_WITH_URLS = (
    "httpx",
    "httpcore",
    "telegram",
)  # update ids remembered, so a webhook retry is not answered twice
_BACKTICKED = re.compile(r"`([^`\n]{1,300})`")
_COMMAND = re.compile(r"^/(?P<name>[A-Za-z0-9_]{1,32})(?:@(?P<bot>[A-Za-z0-9_]+))?(?:\s+|$)")
_FILE_NAME = re.compile(r"[^\w.\-]+")


def utf16_len(text: str) -> int:
    """`text`'s length as Telegram counts it."""
    return len(text.encode("utf-16-le")) // 2


def _seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # python-telegram-bot moves it from int to timedelta
        warnings.simplefilter("ignore")
        value: Any = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class TelegramGateway(ChatGateway):
    name: ClassVar[str] = "telegram"
    config_model: ClassVar[type[GatewayConfig]] = TelegramConfig

    def __init__(self, config: TelegramConfig, runtime: Any, *, bot: Bot | None = None) -> None:
        super().__init__(config)
        self.settings = config
        self.runtime = runtime
        token = config.token.get_secret_value() if config.token else ""
        if not token or token.startswith("${"):
            raise ConfigError(
                "gateway.telegram.token is not set: put the bot token BotFather gave in "
                "TELEGRAM_BOT_TOKEN",
                key="gateway.telegram.token",
            )
        self._token = token
        if bot is None:
            api = config.api_url
            bot = Bot(
                token,
                base_url=f"{api}/bot",
                base_file_url=f"{api}/file/bot",
                request=HTTPXRequest(connection_pool_size=config.max_concurrent * 2 + 8),
                get_updates_request=HTTPXRequest(read_timeout=10.0),
            )
        self.bot = bot
        self.me: User | None = None
        self.queue: asyncio.Queue[IncomingMessage] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self.connection = Connection(self.name, self._session, scrub=self._scrub)
        self._hidden = _TokenFilter(token)  # httpx logs each request's URL, token included
        self._offset: int | None = None
        self.webhook_check_every = WEBHOOK_CHECK_EVERY
        self._seen: deque[int] = deque(maxlen=SEEN_UPDATES)
        self._chosen: dict[str, str] = {}  # chat id -> agent id picked with /use
        self._typing: dict[str, asyncio.Task[None]] = {}  # message id -> its indicator
        # (chat id, message id) of a "reply with your answer" message -> its ticket session
        self._asking: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def _scrub(self, text: str) -> str:
        """`text` without the bot token (an SDK error can quote it)."""
        return text.replace(self._token, "***")

    @classmethod
    def from_config(cls, runtime: Any, config: Any, **options: Any) -> TelegramGateway | None:
        return cls(config, runtime, **options) if config.enabled else None

    # ------------------------------------------------------------ the Gateway trait
    async def connect(self) -> None:
        """Load the chats' choices and keep the link up (in the background)."""
        self._chosen = await run_blocking(chat_agents.load, self.runtime.db, self.name)
        for name in LOGGERS_WITH_URLS:
            logging.getLogger(name).addFilter(self._hidden)
        self.connection.start()

    async def disconnect(self) -> None:
        await self.connection.stop()
        await self._confirm_updates()
        for task in [*self._typing.values(), *self._tasks]:
            task.cancel()
        with contextlib.suppress(TelegramError, RuntimeError):
            await self.bot.shutdown()
        for name in LOGGERS_WITH_URLS:
            logging.getLogger(name).removeFilter(self._hidden)

    async def receive(self) -> IncomingMessage:
        message = await self.queue.get()
        if self.settings.typing:
            chat = self.conversation_key(message)
            self._typing[message.id] = asyncio.create_task(self._keep_typing(chat, message.id))
        return message

    async def send(self, message: OutgoingMessage) -> None:
        """Send a reply (to the message it answers) or a spontaneous message to a chat:
        the text in pieces, buttons under the last, then the files the text names."""
        chat = message.target.channel_id
        if chat is None:
            raise ValueError("a Telegram message needs a target chat id")
        if message.reply_to is not None:
            self._stop_typing(message.reply_to)
        pieces = split_text(message.content.text, MESSAGE_LIMIT, measure=utf16_len)
        markup = self._keyboard(buttons_for(message, questions=True))
        replying = _message_number(message.reply_to)
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            await self._call(
                self.bot.send_message,
                chat_id=chat,
                text=piece,
                reply_parameters=(
                    ReplyParameters(replying, allow_sending_without_reply=True)
                    if replying is not None and number == 0
                    else None
                ),
                reply_markup=markup if last else None,
            )
        for path, data in await self._files_named(chat, message.content.text):
            await self._call(
                self.bot.send_document,
                chat_id=chat,
                document=data,
                filename=path.rsplit("/", 1)[-1],
                reply_parameters=(
                    ReplyParameters(replying, allow_sending_without_reply=True)
                    if replying is not None
                    else None
                ),
            )

    # ------------------------------------------------------------ conversations
    def agent(self) -> str | None:
        return self.settings.agent

    def agent_for_message(self, message: IncomingMessage) -> str | None:
        return self._agent_name(self.conversation_key(message))

    def _agent_name(self, chat: str) -> str | None:
        """The configured channel agent, else the one the chat picked, else the gateway's."""
        pinned = self.settings.channel_agents.get(chat)
        return pinned or self._chosen.get(chat) or self.settings.agent

    async def _agent_of(self, chat: str) -> Agent:
        return await run_blocking(agent_for, self.runtime, self._agent_name(chat), self.name)

    # ------------------------------------------------------------ the link
    async def _session(self) -> None:
        """One connected stretch: check the token, then poll (or set the webhook) until
        the platform fails; Connection retries."""
        await self.bot.initialize()
        self.me = await self._call(self.bot.get_me)
        if self.settings.mode == "webhook":
            assert self.settings.webhook_url is not None
            assert self.settings.webhook_secret is not None
            await self._call(
                self.bot.set_webhook,
                url=self.settings.webhook_url,
                secret_token=self.settings.webhook_secret.get_secret_value(),
                allowed_updates=list(ALLOWED_UPDATES),
            )
            self.connection.mark_connected()
            while True:  # updates arrive through `feed`; check the webhook now and then
                await asyncio.sleep(self.webhook_check_every)
                info = await self._call(self.bot.get_webhook_info)
                if info.url != self.settings.webhook_url:
                    raise ConnectionError("the webhook is no longer set on Telegram's side")
        await self._call(self.bot.delete_webhook)
        self.connection.mark_connected()
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=self._offset,
                    timeout=self.settings.poll_timeout,
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc))
                continue
            for update in updates:
                self._offset = update.update_id + 1
                await self._dispatch(update)

    async def _confirm_updates(self) -> None:
        """Tell Telegram the updates taken so far are done (a getUpdates with the next
        offset confirms them); without it, the next start would be given them again."""
        if self.settings.mode != "polling" or self._offset is None:
            return
        with contextlib.suppress(TelegramError, RuntimeError, TimeoutError):
            async with asyncio.timeout(5):
                await self.bot.get_updates(offset=self._offset, timeout=0, limit=1)

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """A Bot API call; a 429 waits what Telegram asks, up to three times."""
        for _ in range(3):
            try:
                return await method(*args, **kwargs)
            except RetryAfter as exc:
                log.info("telegram: rate-limited, waiting %.0f s", _seconds(exc))
                await asyncio.sleep(_seconds(exc))
        return await method(*args, **kwargs)

    def webhook_secret(self) -> str | None:
        """The secret Telegram sends with each update (webhook mode), else None."""
        secret = self.settings.webhook_secret
        return secret.get_secret_value() if self.settings.mode == "webhook" and secret else None

    async def feed(self, data: dict[str, Any]) -> None:
        """An update POSTed to the webhook (its secret already checked); ValueError when
        it is not one."""
        try:
            update = Update.de_json(data, self.bot)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a Telegram update: {type(exc).__name__}") from None
        await self._dispatch(update)

    async def _dispatch(self, update: Update) -> None:
        if update.update_id in self._seen:
            return  # Telegram sent it again
        self._seen.append(update.update_id)
        if update.callback_query is not None:
            self._spawn(self._on_press(update.callback_query))
        elif update.message is not None:
            await self._on_message(update.message)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("telegram: %s", self._scrub(repr(task.exception())))

    # ------------------------------------------------------------ messages in
    def allows(self, message: Message) -> bool:
        """Whether the sender may reach an agent in this chat (bots never)."""
        user = message.from_user
        if user is None or user.is_bot:
            return False
        chat = str(message.chat.id)
        names = [str(user.id)] + ([f"@{user.username}"] if user.username else [])
        return any(self.settings.allows(name, chat) for name in names)

    def addressed(self, message: Message) -> bool:
        """A private chat always; a group when it mentions the bot, replies to it, or
        sends a command not addressed to another bot."""
        if message.chat.type == ChatType.PRIVATE:
            return True
        me = self.me
        if me is None:
            return False
        text = message.text or message.caption or ""
        command = _COMMAND.match(text)
        if command is not None:
            return command["bot"] is None or command["bot"].lower() == (me.username or "").lower()
        replied = message.reply_to_message
        if replied is not None and replied.from_user is not None and replied.from_user.id == me.id:
            return True
        return f"@{me.username}".lower() in [m.lower() for m in self._mentions(message)]

    @staticmethod
    def _mentions(message: Message) -> list[str]:
        entities = message.parse_entities([MessageEntityType.MENTION])
        entities |= message.parse_caption_entities([MessageEntityType.MENTION])
        return list(entities.values())

    async def _on_message(self, message: Message) -> None:
        if not self.allows(message):
            user = message.from_user
            if user is not None and not user.is_bot:
                log.info(
                    "telegram: not answering user %s (@%s) in chat %s: not in the allow-lists",
                    user.id,
                    user.username or "-",
                    message.chat.id,
                )
            return
        if not self.addressed(message):
            return
        text = (message.text or message.caption or "").strip()
        replied = message.reply_to_message
        asked = (str(message.chat.id), replied.message_id) if replied is not None else None
        if asked is not None and asked in self._asking:
            await self._answer(message, asked, text)
            return
        command = _COMMAND.match(text)
        if command is not None and command["name"].lower() in ("start", "agents", "use"):
            try:  # in order, before the chat's next message: /use then a question
                await self._command(message, command["name"].lower(), text[command.end() :])
            except (TelegramError, OpenCrabError) as exc:
                log.warning("telegram: could not answer a command: %s", self._scrub(str(exc)))
            return
        if message.document is not None or message.photo:
            self._spawn(self._with_file(message, text))
            return
        if text:
            self._enqueue(message, text)

    def _strip_mention(self, text: str) -> str:
        if self.me is None or not self.me.username:
            return text
        return re.sub(rf"@{re.escape(self.me.username)}\b\s*", "", text, flags=re.I).strip()

    def _enqueue(self, message: Message, text: str) -> None:
        user = message.from_user
        assert user is not None
        chat = str(message.chat.id)
        incoming = IncomingMessage(
            id=f"tg:{chat}:{message.message_id}",
            source=ChatSource(gateway=self.name, conversation=chat),
            content=MessageContent(text=self._strip_mention(text)),
            sender=Sender(id=str(user.id), name=user.username or user.full_name, is_bot=False),
            channel=Channel(id=chat, name=message.chat.title or message.chat.username),
            timestamp=message.date,
        )
        try:
            self.queue.put_nowait(incoming)
        except asyncio.QueueFull:
            log.warning("telegram: %d messages waiting; dropped %s", QUEUE_SIZE, incoming.id)

    async def _with_file(self, message: Message, text: str) -> None:
        """Download the message's document or largest photo into the answering agent's
        workspace, then queue the message naming where it is."""
        chat = str(message.chat.id)
        if message.document is not None:
            file_id, size = message.document.file_id, message.document.file_size
            name = message.document.file_name or f"document-{message.message_id}"
        else:
            photo = message.photo[-1]
            file_id, size, name = photo.file_id, photo.file_size, f"photo-{message.message_id}.jpg"
        name = _FILE_NAME.sub("_", name).strip("._") or f"file-{message.message_id}"
        path = f"{self.settings.files_folder}/{chat.lstrip('-')}/{message.message_id}-{name}"
        limit = self.settings.max_file_mb * 1024 * 1024
        try:
            if size is not None and size > limit:
                raise OpenCrabError(f"the file is over {self.settings.max_file_mb} MB")
            agent = await self._agent_of(chat)
            ws = Workspace.for_agent(self.runtime.settings, agent.id)
            await run_blocking(ws.check, path)
            found = await self._call(self.bot.get_file, file_id)
            data = bytes(await found.download_as_bytearray())
            if len(data) > limit:
                raise OpenCrabError(f"the file is over {self.settings.max_file_mb} MB")
            await run_blocking(ws.write, path, data)
        except (OpenCrabError, TelegramError) as exc:
            await self._tell(message, f"Sorry, I could not take that file: {exc}")
            return
        said = f"{text}\n\n" if text else ""
        self._enqueue(
            message, f"{said}[I sent a file: it is in your workspace at {path} ({len(data)} bytes)]"
        )

    async def _tell(self, message: Message, text: str) -> None:
        await self._call(
            self.bot.send_message,
            chat_id=message.chat.id,
            text=text,
            reply_parameters=ReplyParameters(message.message_id, allow_sending_without_reply=True),
        )

    # ------------------------------------------------------------ commands
    async def _command(self, message: Message, name: str, argument: str) -> None:
        chat = str(message.chat.id)
        if name == "start":
            current = self._agent_name(chat)
            who = f"{current} answers here" if current else "the one agent answers here"
            await self._tell(
                message,
                "Hello! Write to me and an agent answers "
                f"({who}). /agents lists the agents, /use <agent> picks one for this chat.",
            )
        elif name == "agents":
            await self._tell(message, await self._agents_text(chat))
        else:
            await self._tell(message, await self._use(chat, argument.strip(), message))

    async def _choices(self) -> list[Agent]:
        """The agents `/use` may pick."""
        allowed = self.settings.agents
        everyone: list[Agent] = await run_blocking(self.runtime.agents.list)
        if "*" in allowed:
            return everyone
        return [a for a in everyone if a.name in allowed or a.id in allowed]

    async def _agents_text(self, chat: str) -> str:
        choices = await self._choices()
        try:
            current = (await self._agent_of(chat)).id
        except OpenCrabError:
            current = None
        if not choices:
            return "No agent can be picked here."
        lines = [f"{'•' if a.id == current else '-'} {a.name}" for a in choices]
        footer = (
            "This chat's agent is set in the configuration."
            if chat in self.settings.channel_agents
            else "Pick one with /use <name>."
        )
        return "Agents:\n" + "\n".join(lines) + "\n" + footer

    async def _use(self, chat: str, wanted: str, message: Message) -> str:
        if not wanted:
            return "Say which agent: /use <name> (/agents lists them)."
        if chat in self.settings.channel_agents:
            pinned = self.settings.channel_agents[chat]
            return (
                f"This chat's agent is set in the configuration ({pinned}): /use cannot change it."
            )
        picked = next((a for a in await self._choices() if wanted in (a.name, a.id)), None)
        if picked is None:
            return f"There is no agent {wanted[:100]!r} to pick here (/agents lists them)."
        user = message.from_user
        by = f"telegram:{user.id}" if user else "telegram"
        await run_blocking(chat_agents.save, self.runtime.db, self.name, chat, picked.id, by=by)
        self._chosen[chat] = picked.id
        return f"{picked.name} answers in this chat from now on."

    # ------------------------------------------------------------ buttons
    @staticmethod
    def _keyboard(buttons: list[Button]) -> InlineKeyboardMarkup | None:
        if not buttons:
            return None
        keys = [InlineKeyboardButton(b.label, callback_data=b.id) for b in buttons]
        return InlineKeyboardMarkup([keys[i : i + 2] for i in range(0, len(keys), 2)])

    async def _on_press(self, query: CallbackQuery) -> None:
        held = query.message
        chat = str(held.chat.id) if held is not None else ""
        user = query.from_user
        names = [str(user.id)] + ([f"@{user.username}"] if user.username else [])
        if user.is_bot or not any(self.settings.allows(n, chat) for n in names):
            await self._call(self.bot.answer_callback_query, query.id, text="Not yours to decide.")
            return
        data = query.data or ""
        session = question_of(data)
        if session is not None:
            await self._ask_for_answer(query, session)
            return
        said = await press(self.runtime, data, by=user.username or str(user.id))
        await self._call(self.bot.answer_callback_query, query.id, text=said)
        if held is None or not data.startswith("ap:") or said == "That button is not one of mine.":
            return
        approval = data.rsplit(":", 1)[0] + ":"
        markup = getattr(held, "reply_markup", None)
        rows = [
            [k for k in row if not (k.callback_data or "").startswith(approval)]
            for row in (markup.inline_keyboard if markup else ())
        ]
        rows = [row for row in rows if row]
        await self._call(
            self.bot.edit_message_reply_markup,
            chat_id=held.chat.id,
            message_id=held.message_id,
            reply_markup=InlineKeyboardMarkup(rows) if rows else None,
        )

    async def _ask_for_answer(self, query: CallbackQuery, session: str) -> None:
        """An Answer button pressed: a message to reply to with the answer."""
        held = query.message
        if held is None:
            await self._call(self.bot.answer_callback_query, query.id, text="Answer in the inbox.")
            return
        asking = await self._call(
            self.bot.send_message,
            chat_id=held.chat.id,
            text="Reply to this message with your answer to the ticket's question.",
            reply_parameters=ReplyParameters(held.message_id, allow_sending_without_reply=True),
            reply_markup=ForceReply(input_field_placeholder="Your answer"),
        )
        self._asking[(str(held.chat.id), asking.message_id)] = session
        while len(self._asking) > ASKING_AT_MOST:
            self._asking.popitem(last=False)
        await self._call(
            self.bot.answer_callback_query, query.id, text="Reply to my message with your answer."
        )

    async def _answer(self, message: Message, asked: tuple[str, int], text: str) -> None:
        """A reply to a "reply with your answer" message: the ticket's answer."""
        user = message.from_user
        assert user is not None  # allowed: a person
        taken, said = await answer_question(
            self.runtime, self._asking[asked], text, by=user.username or str(user.id)
        )
        if taken:
            self._asking.pop(asked, None)
        try:
            await self._tell(message, said)
        except TelegramError as exc:
            log.warning("telegram: could not confirm an answer: %s", self._scrub(str(exc)))

    # ------------------------------------------------------------ files out, typing
    async def _files_named(self, chat: str, text: str) -> list[tuple[str, bytes]]:
        """The workspace files the text names in backticks (see the module docstring)."""
        named = list(dict.fromkeys(m.group(1).strip() for m in _BACKTICKED.finditer(text)))
        if not named:
            return []
        try:
            agent = await self._agent_of(chat)
        except OpenCrabError:
            return []
        ws = Workspace.for_agent(self.runtime.settings, agent.id)
        limit = self.settings.max_file_mb * 1024 * 1024
        files: list[tuple[str, bytes]] = []
        for path in named:
            entry = await run_blocking(_file_entry, ws, path)
            if entry is None or entry.is_dir or entry.size > limit:
                continue
            files.append((path, await run_blocking(ws.read_bytes, path)))
            if len(files) == FILES_PER_REPLY:
                break
        return files

    async def _keep_typing(self, chat: str, message_id: str) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + TYPING_FOR_AT_MOST
        try:
            while loop.time() < until:
                with contextlib.suppress(TelegramError):
                    await self.bot.send_chat_action(chat_id=chat, action=ChatAction.TYPING)
                await asyncio.sleep(TYPING_EVERY)
        finally:
            self._typing.pop(message_id, None)

    def finished(self, message: IncomingMessage) -> None:
        """The runner is done with `message` (answered, refused, or no reply at all)."""
        self._stop_typing(message.id)

    def _stop_typing(self, message_id: str) -> None:
        task = self._typing.pop(message_id, None)
        if task is not None:
            task.cancel()


class _TokenFilter(logging.Filter):
    """Writes the bot token out of log records (httpx logs every request's URL, and the
    Bot API puts the token in the path)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.token in text:
            record.msg, record.args = text.replace(self.token, "***"), None
        return True


def _message_number(message_id: str | None) -> int | None:
    """The Telegram message number in an IncomingMessage id `tg:<chat>:<number>`."""
    if not message_id or not message_id.startswith("tg:"):
        return None
    number = message_id.rsplit(":", 1)[-1]
    return int(number) if number.isdigit() else None


def _file_entry(ws: Workspace, path: str) -> Any:
    """The workspace entry at `path`, or None when it is not a usable path there."""
    try:
        return ws.entry(path)
    except OpenCrabError:
        return None
