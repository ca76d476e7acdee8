"""The Slack gateway (seed `MessageSource::Slack`), on slack_sdk's asyncio clients.

Configured by `[gateway.slack]` (`SlackConfig`): the bot token (`xoxb-…`, from
`${SLACK_BOT_TOKEN}`), and either the app-level token (`xapp-…`) for Socket Mode — the
default: Slack is reached over an outgoing WebSocket, no public URL needed — or the
signing secret for the Events API over HTTP (`mode = "events"`: Slack posts to
`/hooks/slack/events`, `/hooks/slack/commands` and `/hooks/slack/interactive`, each
request's `v0:timestamp:body` HMAC-SHA256 checked, five minutes' leeway, before its body
is read as anything).

- A mention of the bot in a channel, or a direct message, from a user or channel of the
  allow-lists (`PlatformConfig`: nobody until allowed) reaches the agent bound to the
  channel; bots' messages (itself included) and edits are ignored. A mention's answer goes
  in the mention's thread (one session per thread); a DM's in the DM (one session per DM).
- `/crab <agent> <text>` asks the named agent; the answer is posted in the channel.
- Files attached to a message are downloaded with the bot token (from Slack's own hosts
  only) into the agent's workspace, `slack/<ts>-<name>`, within its quota; the agent is
  told where. A workspace file the answer names in backticks (`report.md`) is uploaded
  to the thread (files.getUploadURLExternal + completeUploadExternal).
- An answer that waits on a person's approval, and the inbox's notices of approvals, carry
  Block Kit buttons (`buttons_for`); pressing one (block_actions, by an allowed user)
  decides the approval (`press`) and the message shows the outcome instead of buttons.
  A ticket's question among the inbox's notices carries an Answer button: it opens a
  modal (views.open) whose submission, by an allowed user, is the ticket's answer
  (`answer_question`: the ticket resumes); the outcome is posted in the notice's thread.
- Long answers are split at 3,900 characters on sentence ends (`split_text`).
- Slack shows no "typing…" for bots (the Web API has no such call outside assistant
  threads), so `typing` has no effect here.
- The link (`connection`) retries with backoff; its state is what the dashboard shows. An
  event Slack delivers twice (a retry, the same `event_id`) is handled once.

Sending to a channel id without a thread works too: the gateway is an outlet for an
agent's heartbeat home and the inbox's notices (`runtime.outlets["slack"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import SecretStr

from opencrab.errors import ConfigError, NotFoundError, OpenCrabError
from opencrab.gateway.base import GatewayConfig
from opencrab.gateway.configs import SlackConfig
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

if TYPE_CHECKING:
    from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest
    from slack_sdk.web.async_client import AsyncWebClient

    from opencrab.core.runtime import Runtime

log = logging.getLogger(__name__)
sdk_log = logging.getLogger("opencrab.gateway.slack.sdk")  # the SDK's, quieter than ours
sdk_log.setLevel(logging.WARNING)

TEXT_LIMIT = 3900  # characters of one message's text (4,000 reads well; Slack cuts at 40k)
SECTION_LIMIT = 3000  # characters of a Block Kit section's text
QUEUE_SIZE = 1000
SEEN_EVENTS = 5000  # event ids remembered, to handle a retried delivery once
FILES_FOLDER = "slack"
MAX_FILES_OUT = 5
ANSWER_VIEW = "opencrab_answer"  # the callback_id of the modal that answers a question
_MENTION = re.compile(r"<@([A-Z0-9]+)>\s*")
_NAMED = re.compile(r"`([^`\n]{1,300})`")
_SAFE_NAME = re.compile(r"[^\w.\- ]+")


def _secret(value: SecretStr | None) -> str:
    text = value.get_secret_value() if value is not None else ""
    return "" if text.startswith("${") else text  # an unset ${VAR} is no token


class _Recent:
    """The last `size` keys seen: `add` says whether a key is new."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._keys: OrderedDict[str, None] = OrderedDict()

    def add(self, key: str) -> bool:
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self.size:
            self._keys.popitem(last=False)
        return True


class SlackGateway(ChatGateway):
    name: ClassVar[str] = "slack"
    config_model: ClassVar[type[GatewayConfig]] = SlackConfig

    def __init__(self, config: SlackConfig, runtime: Runtime) -> None:
        super().__init__(config)
        self.settings = config
        self.runtime = runtime
        self.bot_token = _secret(config.bot_token)
        self.app_token = _secret(config.app_token)
        self.signing_secret = _secret(config.signing_secret)
        self.connection = Connection(
            self.name,
            self._session,
            first=config.retry_first_secs,
            cap=config.retry_cap_secs,
            scrub=self._scrub,
        )
        self.queue: asyncio.Queue[IncomingMessage] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self.seen = _Recent(SEEN_EVENTS)
        self.bot_user_id: str | None = None
        self.team_id: str | None = None
        self._web: AsyncWebClient | None = None
        # message id -> the agent that answers it (name or id; "" the gateway's), so that
        # files its answer names are looked for in that agent's workspace
        self._agents: OrderedDict[str, str] = OrderedDict()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ the Gateway trait
    async def connect(self) -> None:
        """Check the settings, then keep the link up in the background (never waits for
        Slack: a Slack that cannot be reached shows as retrying)."""
        problem = self._missing()
        if problem:
            key, what = problem
            raise ConfigError(f"gateway.slack.{key} is not set: {what}", key=f"gateway.slack.{key}")
        from slack_sdk.web.async_client import AsyncWebClient

        self._web = AsyncWebClient(token=self.bot_token, base_url=self._base_url(), logger=sdk_log)
        self.connection.start()

    def _missing(self) -> tuple[str, str] | None:
        if not self.bot_token:
            return "bot_token", "put the bot token (xoxb-…) in SLACK_BOT_TOKEN"
        if self.settings.mode == "socket" and not self.app_token:
            return "app_token", "Socket Mode needs the app-level token (xapp-…) in SLACK_APP_TOKEN"
        if self.settings.mode == "events" and not self.signing_secret:
            return "signing_secret", "the Events API needs the app's signing secret"
        return None

    async def disconnect(self) -> None:
        await self.connection.stop()
        for task in list(self._tasks):
            task.cancel()

    async def receive(self) -> IncomingMessage:
        return await self.queue.get()

    async def send(self, message: OutgoingMessage) -> None:
        """Post `message` to its channel (`C123`) or thread (`C123:1712.0001`), split at
        the limit; buttons on the last piece; files the text names from the workspace."""
        channel, _, thread = (message.target.channel_id or "").partition(":")
        if not channel:
            raise ValueError("a Slack message needs a target channel")
        web = self._client()
        buttons = buttons_for(message, questions=True)
        pieces = split_text(message.content.text, TEXT_LIMIT) or ([""] if buttons else [])
        for number, piece in enumerate(pieces, 1):
            last = number == len(pieces)
            blocks = None
            if last and buttons:
                blocks = [_actions(buttons)]
                if piece and len(piece) <= SECTION_LIMIT:
                    blocks.insert(0, _section(piece))
                elif piece:  # too long for a section: the text alone, then the buttons
                    await web.chat_postMessage(
                        channel=channel, thread_ts=thread or None, text=piece
                    )
                    piece = "Decide here:"
                    blocks.insert(0, _section(piece))
            await web.chat_postMessage(
                channel=channel,
                thread_ts=thread or None,
                text=piece or "Decide here:",
                blocks=blocks,
                unfurl_links=False,
            )
        named = self._agents.get(message.reply_to or "")
        if named is not None and _NAMED.search(message.content.text):
            agent = await run_blocking(agent_for, self.runtime, named or None, self.name)
            await self._send_files(message.content.text, agent.id, channel, thread)

    # ------------------------------------------------------------ conversations
    def agent(self) -> str | None:
        return self.settings.agent

    def agent_for_message(self, message: IncomingMessage) -> str | None:
        """The agent a slash command named, else the channel's, else the gateway's."""
        named = message.metadata.get("agent")
        if isinstance(named, str) and named:
            return named
        channel = message.channel.id if message.channel is not None else ""
        return self.settings.agent_of(channel)

    def max_concurrent(self) -> int:
        return self.settings.max_concurrent

    # ------------------------------------------------------------ the link
    def _base_url(self) -> str:
        url = self.settings.api_url
        return url if url.endswith("/") else url + "/"

    def _client(self) -> AsyncWebClient:
        if self._web is None:
            raise ConfigError("the Slack gateway is not connected", key="gateway.slack")
        return self._web

    def _scrub(self, text: str) -> str:
        for secret in (self.bot_token, self.app_token, self.signing_secret):
            if secret:
                text = text.replace(secret, "***")
        return text

    async def _session(self) -> None:
        """One life of the link: who we are (auth.test), then Socket Mode until the socket
        drops; in events mode, auth.test alone (Slack comes to us). Slack's refusals are
        told by their error code (invalid_auth, …), which the dashboard shows."""
        from slack_sdk.errors import SlackApiError

        try:
            await self._link()
        except SlackApiError as exc:
            said = exc.response.get("error") if exc.response is not None else None
            method = urlsplit(str(getattr(exc.response, "api_url", ""))).path.rsplit("/", 1)[-1]
            raise ConnectionError(
                f"Slack answered {said or 'an error'} to {method or 'a call'}"
            ) from None

    async def _link(self) -> None:
        web = self._client()
        who = await web.auth_test()
        self.bot_user_id, self.team_id = who.get("user_id"), who.get("team_id")
        if self.settings.mode == "events":
            self.connection.mark_connected()
            await asyncio.Event().wait()  # until stopped
        from slack_sdk.socket_mode.aiohttp import SocketModeClient
        from slack_sdk.web.async_client import AsyncWebClient

        client = SocketModeClient(
            app_token=self.app_token,
            web_client=AsyncWebClient(base_url=self._base_url(), logger=sdk_log),
            auto_reconnect_enabled=False,  # Connection does the retrying, with backoff
            ping_interval=self.settings.ping_interval_secs,
            logger=sdk_log,
        )
        closed = asyncio.Event()

        async def on_close(_: Any) -> None:
            closed.set()

        async def on_raw(_: Any, message: dict[str, Any], raw: str | None = None) -> None:
            if message.get("type") == "hello":
                self.connection.mark_connected()

        client.on_close_listeners.append(on_close)
        client.message_listeners.append(on_raw)
        client.socket_mode_request_listeners.append(self._on_request)
        try:
            client.wss_uri = await client.issue_new_wss_url()
            async with asyncio.timeout(self.settings.connect_timeout_secs):
                await client.connect()  # type: ignore[no-untyped-call]
            while not closed.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.ping_interval_secs):
                        await closed.wait()
                if not await client.is_connected():
                    break
        finally:
            with contextlib.suppress(Exception):
                await client.close()  # type: ignore[no-untyped-call]

    async def _on_request(
        self, client: AsyncBaseSocketModeClient, request: SocketModeRequest
    ) -> None:
        """A Socket Mode envelope: acknowledged at once (Slack redelivers what is not),
        then handled."""
        from slack_sdk.socket_mode.response import SocketModeResponse

        payload = request.payload
        if request.type == "slash_commands":
            answer = await self.on_command(payload)
            await client.send_socket_mode_response(
                SocketModeResponse(envelope_id=request.envelope_id, payload={"text": answer})
            )
            return
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        if request.type == "events_api":
            await self.on_event_callback(payload)
        elif request.type == "interactive":
            await self.on_interaction(payload)

    # ------------------------------------------------------------ what Slack sends
    async def on_event_callback(self, body: Mapping[str, Any]) -> None:
        """An Events API callback (either mode): a mention or DM becomes a message."""
        event_id = body.get("event_id")
        if isinstance(event_id, str) and not self.seen.add(event_id):
            return  # a retry of an event already handled
        event = body.get("event")
        if not isinstance(event, dict):
            return
        kind, channel_type = event.get("type"), event.get("channel_type")
        direct = kind == "message" and channel_type == "im"
        if kind != "app_mention" and not direct:
            return
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if event.get("bot_id") or event.get("subtype") not in (None, "file_share"):
            return  # bots (itself included), edits, joins
        if not (isinstance(user, str) and isinstance(channel, str) and isinstance(ts, str)):
            return
        if user == self.bot_user_id:
            return
        if not self.settings.allows(user, channel):
            log.info("slack: %s in %s is not on the allow-lists; ignored", user, channel)
            return
        team = str(body.get("team_id") or self.team_id or "T")
        raw = str(event.get("text") or "")
        text = _MENTION.sub(lambda m: "" if m.group(1) == self.bot_user_id else m.group(0), raw)
        text = text.strip()
        thread = event.get("thread_ts") if direct else (event.get("thread_ts") or ts)
        where = f"{channel}:{thread}" if thread else channel
        message = IncomingMessage(
            id=f"{channel}:{ts}",
            source=ChatSource(
                gateway=self.name,
                conversation=f"{team}/{channel}/{thread}" if thread else f"{team}/{channel}",
                channel_id=where,
            ),
            content=MessageContent(text=text),
            sender=Sender(id=user, name=user),
            channel=Channel(id=channel),
        )
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]
        if files:
            message = await self._take_files(message, files, ts)
        self._enqueue(message)

    async def on_command(self, payload: Mapping[str, Any]) -> str:
        """`/crab <agent> <text>`: what to answer the person at once (only they see it);
        the agent's answer follows in the channel."""
        if payload.get("command") != self.settings.slash_command:
            return f"This app answers {self.settings.slash_command} only."
        user, channel = str(payload.get("user_id") or ""), str(payload.get("channel_id") or "")
        if not user or not channel or not self.settings.allows(user, channel):
            return "You are not on this bot's allow-list."
        named, _, text = str(payload.get("text") or "").strip().partition(" ")
        text = text.strip()
        if not named or not text:
            return f"Usage: {self.settings.slash_command} <agent> <what to ask>"
        try:
            agent = await run_blocking(self.runtime.agents.get, named)
        except NotFoundError:
            return f"No agent is named {named!r}."
        team = str(payload.get("team_id") or self.team_id or "T")
        self._enqueue(
            IncomingMessage(
                id=f"{channel}:cmd:{payload.get('trigger_id') or time.time()}",
                source=ChatSource(
                    gateway=self.name, conversation=f"{team}/{channel}/cmd", channel_id=channel
                ),
                content=MessageContent(text=text),
                sender=Sender(id=user, name=str(payload.get("user_name") or user)),
                channel=Channel(id=channel),
                metadata={"agent": agent.name},
            )
        )
        return f"Asked {agent.name}; the answer follows here."

    async def on_interaction(self, payload: Mapping[str, Any]) -> None:
        """A button pressed (block_actions): decided by `press` when the presser is
        allowed; the message's buttons give way to the outcome. An Answer button opens
        the modal; its submission (view_submission) answers the ticket."""
        if payload.get("type") == "view_submission":
            await self._on_answer(payload)
            return
        if payload.get("type") != "block_actions":
            return
        user = payload.get("user") or {}
        channel = (payload.get("channel") or {}).get("id") or (payload.get("container") or {}).get(
            "channel_id"
        )
        actions = payload.get("actions") or []
        if not (isinstance(user, dict) and isinstance(channel, str) and actions):
            return
        who = str(user.get("id") or "")
        if not self.settings.allows(who, channel):
            log.info("slack: %s pressed a button in %s but is not allowed; ignored", who, channel)
            return
        chosen = str(actions[0].get("value") or actions[0].get("action_id") or "")
        session = question_of(chosen)
        if session is not None:
            await self._open_answer(payload, session, channel)
            return
        said = await press(self.runtime, chosen, by=f"slack:{user.get('username') or who}")
        original = payload.get("message") or {}
        text = str(original.get("text") or "")
        ts = original.get("ts") or (payload.get("container") or {}).get("message_ts")
        blocks = [_section(text[:SECTION_LIMIT])] if text else []
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": said}]})
        web = self._client()
        if isinstance(ts, str):
            await web.chat_update(channel=channel, ts=ts, text=f"{text}\n{said}", blocks=blocks)
        else:
            await web.chat_postMessage(channel=channel, text=said)

    async def _open_answer(self, payload: Mapping[str, Any], session: str, channel: str) -> None:
        """The modal asking for the answer to a ticket's question (where it was pressed
        rides along in its private_metadata)."""
        trigger = payload.get("trigger_id")
        if not isinstance(trigger, str):
            return
        original = payload.get("message") or {}
        thread = original.get("thread_ts") or original.get("ts")
        where = {"session": session, "channel": channel, "thread": thread}
        await self._client().views_open(
            trigger_id=trigger,
            view={
                "type": "modal",
                "callback_id": ANSWER_VIEW,
                "private_metadata": json.dumps(where),
                "title": {"type": "plain_text", "text": "Answer the question"},
                "submit": {"type": "plain_text", "text": "Send"},
                "close": {"type": "plain_text", "text": "Cancel"},
                "blocks": [
                    {
                        "type": "input",
                        "block_id": "answer",
                        "label": {"type": "plain_text", "text": "Your answer"},
                        "element": {
                            "type": "plain_text_input",
                            "action_id": "text",
                            "multiline": True,
                        },
                    }
                ],
            },
        )

    async def _on_answer(self, payload: Mapping[str, Any]) -> None:
        """The answer modal submitted: the ticket's answer, when its sender is allowed
        where the button was; the outcome goes to the notice's thread."""
        view = payload.get("view") or {}
        user = payload.get("user") or {}
        if not (isinstance(view, dict) and isinstance(user, dict)):
            return
        if view.get("callback_id") != ANSWER_VIEW:
            return
        try:
            where = json.loads(str(view.get("private_metadata") or ""))
        except ValueError:
            return
        if not isinstance(where, dict):
            return
        session, channel = where.get("session"), where.get("channel")
        if not (
            isinstance(session, str) and question_of(f"tq:{session}") and isinstance(channel, str)
        ):
            return
        who = str(user.get("id") or "")
        if not self.settings.allows(who, channel):
            log.info(
                "slack: %s answered a question in %s but is not allowed; ignored", who, channel
            )
            return
        values = (view.get("state") or {}).get("values") or {}
        text = str(((values.get("answer") or {}).get("text") or {}).get("value") or "")
        _, said = await answer_question(
            self.runtime, session, text, by=f"slack:{user.get('username') or who}"
        )
        thread = where.get("thread")
        await self._client().chat_postMessage(
            channel=channel,
            thread_ts=thread if isinstance(thread, str) else None,
            text=f"<@{who}>: {said}",
        )

    def _enqueue(self, message: IncomingMessage) -> None:
        self._remember(message)
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            log.warning("slack: %d messages waiting; dropped %s", QUEUE_SIZE, message.id)

    # ------------------------------------------------------------ files
    def _agent_id_for(self, message: IncomingMessage) -> str:
        named = self.agent_for_message(message)
        return agent_for(self.runtime, named, self.name).id

    async def _take_files(
        self, message: IncomingMessage, files: list[dict[str, Any]], ts: str
    ) -> IncomingMessage:
        """Each file into the agent's workspace (what failed is said instead)."""
        agent_id = await run_blocking(self._agent_id_for, message)
        notes: list[str] = []
        attachments: list[Attachment] = []
        for item in files[: MAX_FILES_OUT * 2]:
            name = _SAFE_NAME.sub("_", str(item.get("name") or item.get("id") or "file"))[:120]
            path = f"{FILES_FOLDER}/{ts.replace('.', '-')}-{name}"
            try:
                size = await self._download(item, agent_id, path)
            except (OpenCrabError, OSError, ValueError) as exc:
                notes.append(f"[the file {name} could not be kept: {exc}]")
                continue
            except Exception as exc:  # the download failed on the way
                notes.append(f"[the file {name} could not be fetched: {type(exc).__name__}]")
                continue
            notes.append(f"[file saved in your workspace: {path} ({size} bytes)]")
            attachments.append(
                Attachment(url=f"workspace:{path}", content_type=item.get("mimetype"), name=name)
            )
        text = "\n\n".join(part for part in [message.content.text, *notes] if part)
        return message.model_copy(
            update={"content": MessageContent(text=text, attachments=attachments)}
        )

    async def _download(self, item: Mapping[str, Any], agent_id: str, path: str) -> int:
        import aiohttp

        from opencrab.core.workspace import Workspace
        from opencrab.core.workspace_upload import Upload

        url = str(item.get("url_private_download") or item.get("url_private") or "")
        if not self._slack_host(url):
            raise ValueError("its address is not one of Slack's")
        limit = self.settings.file_max_mb * 1024 * 1024
        declared = item.get("size")
        if isinstance(declared, int) and declared > limit:
            raise ValueError(f"it is over {self.settings.file_max_mb} MB")
        ws = Workspace.for_agent(self.runtime.settings, agent_id)
        headers = {"Authorization": f"Bearer {self.bot_token}"}
        timeout = aiohttp.ClientTimeout(total=self.settings.connect_timeout_secs * 4)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(url, headers=headers, allow_redirects=False) as response,
        ):
            if response.status != 200:
                raise ValueError(f"Slack answered {response.status}")
            upload = await run_blocking(
                Upload, ws, path, expected=declared if isinstance(declared, int) else None
            )
            try:
                async for piece in response.content.iter_chunked(256 * 1024):
                    if upload.written + len(piece) > limit:
                        raise ValueError(f"it is over {self.settings.file_max_mb} MB")
                    await run_blocking(upload.write, piece)
                await run_blocking(upload.commit)
            finally:
                await run_blocking(upload.close)
        return upload.written

    def _slack_host(self, url: str) -> bool:
        """Whether `url` is on one of Slack's hosts (https) or the configured API's host
        (a test's, a proxy's): the bot token goes nowhere else."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
            return True
        api = urlsplit(self.settings.api_url)
        return bool(host) and host == (api.hostname or "").lower() and parts.scheme == api.scheme

    def _remember(self, message: IncomingMessage) -> None:
        self._agents[message.id] = self.agent_for_message(message) or ""
        while len(self._agents) > SEEN_EVENTS:
            self._agents.popitem(last=False)

    async def _send_files(self, text: str, agent_id: str, channel: str, thread: str) -> None:
        from opencrab.core.workspace import Workspace

        ws = Workspace.for_agent(self.runtime.settings, agent_id)
        named = list(dict.fromkeys(_NAMED.findall(text)))[: MAX_FILES_OUT * 4]
        sent = 0
        for path in named:
            if sent >= MAX_FILES_OUT:
                break
            try:
                entry = await run_blocking(ws.entry, path.strip())
                if entry is None or entry.is_dir:
                    continue
                if entry.size > self.settings.file_max_mb * 1024 * 1024:
                    continue
                data = await run_blocking(ws.read_bytes, entry.path)
            except (OpenCrabError, OSError, ValueError):
                continue  # not a workspace file: a word in backticks
            await self._client().files_upload_v2(
                channel=channel,
                thread_ts=thread or None,
                content=data,
                filename=entry.name,
                title=entry.name,
            )
            sent += 1

    # ------------------------------------------------------------ the Events API
    def verify(self, body: bytes, headers: Mapping[str, str]) -> bool:
        """Whether the request is Slack's: `v0=` HMAC-SHA256 of `v0:<timestamp>:<body>`
        with the signing secret, its timestamp within five minutes."""
        from slack_sdk.signature import SignatureVerifier

        stamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        if not self.signing_secret or not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
            return False  # no secret to check with, or a timestamp that is no number
        return SignatureVerifier(self.signing_secret).is_valid(body, stamp, signature)

    def later(self, work: Any) -> None:
        """Run `work` (a coroutine) after the HTTP answer: Slack waits three seconds."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("slack: handling a request failed: %r", task.exception())


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _actions(buttons: list[Button]) -> dict[str, Any]:
    elements = []
    for button in buttons:
        element: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": button.label[:75]},
            "action_id": button.id,
            "value": button.id,
        }
        if button.id.endswith(":y"):
            element["style"] = "primary"
        elif button.id.endswith(":n"):
            element["style"] = "danger"
        elements.append(element)
    return {"type": "actions", "elements": elements}


# ---------------------------------------------------------------------- the HTTP routes
def _events_gateway(request: Request) -> SlackGateway | None:
    runtime = getattr(request.app.state, "runtime", None)
    gateway = getattr(runtime, "outlets", {}).get("slack") if runtime is not None else None
    if isinstance(gateway, SlackGateway) and gateway.settings.mode == "events":
        return gateway
    return None


async def _signed(request: Request) -> tuple[SlackGateway, bytes] | Response:
    """The running events-mode gateway and the request's body, once its signature is
    checked; else the response that refuses it."""
    gateway = _events_gateway(request)
    if gateway is None:
        return JSONResponse({"error": "the Slack gateway is not taking events here"}, 404)
    body = await request.body()
    if not gateway.verify(body, request.headers):
        return JSONResponse({"error": "the request signature does not match"}, 401)
    return gateway, body


async def slack_events(request: Request) -> Response:
    """Slack's Events API: url_verification answered, callbacks handled after the 200."""
    checked = await _signed(request)
    if not isinstance(checked, tuple):
        return checked
    gateway, body = checked
    try:
        payload = json.loads(body)
    except ValueError:
        return JSONResponse({"error": "the body is not JSON"}, 400)
    if not isinstance(payload, dict):
        return JSONResponse({"error": "the body is not a JSON object"}, 400)
    if payload.get("type") == "url_verification":
        return JSONResponse({"challenge": str(payload.get("challenge") or "")})
    if payload.get("type") == "event_callback":
        gateway.later(gateway.on_event_callback(payload))
    return Response(status_code=200)


async def slack_commands(request: Request) -> Response:
    """A slash command (form-encoded): the immediate answer only its sender sees."""
    checked = await _signed(request)
    if not isinstance(checked, tuple):
        return checked
    gateway, body = checked
    form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    answer = await gateway.on_command(form)
    return JSONResponse({"response_type": "ephemeral", "text": answer})


async def slack_interactive(request: Request) -> Response:
    """A button pressed: `payload=` JSON, form-encoded."""
    checked = await _signed(request)
    if not isinstance(checked, tuple):
        return checked
    gateway, body = checked
    raw = parse_qs(body.decode("utf-8", "replace")).get("payload", [""])[0]
    try:
        payload = json.loads(raw)
    except ValueError:
        return JSONResponse({"error": "payload is not JSON"}, 400)
    if isinstance(payload, dict):
        gateway.later(gateway.on_interaction(payload))
    return Response(status_code=200)


@hookimpl
def register_routes(app: FastAPI) -> None:
    router = APIRouter(prefix="/hooks/slack", include_in_schema=False)
    router.add_api_route("/events", slack_events, methods=["POST"])
    router.add_api_route("/commands", slack_commands, methods=["POST"])
    router.add_api_route("/interactive", slack_interactive, methods=["POST"])
    app.include_router(router)
