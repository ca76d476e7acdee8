"""The Discord gateway (seed `MessageSource::Discord`), on discord.py.

Configured by `[gateway.discord]`: the bot token (from `${DISCORD_TOKEN}`), the guild
allow-list (required: a bot answers only in servers listed there), optionally channels,
the agent that answers and `mention_only`. Messages from bots (itself included), from
direct messages and from other servers or channels are ignored. The rest become
`IncomingMessage{source: Discord{guild_id, channel_id}}`; GatewayRunner gives each
channel its own session and sends the reply back to the channel, split into messages
of at most 2,000 characters (Discord's limit, counted as Discord counts: UTF-16 units),
at line breaks where possible.

Reading message text needs the privileged "Message Content" intent, switched on for the
bot in Discord's developer portal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any, ClassVar

import discord

from opencrab.errors import ConfigError
from opencrab.gateway.base import GatewayConfig
from opencrab.gateway.configs import DiscordConfig
from opencrab.gateway.serve import ChatGateway
from opencrab.messages import (
    Attachment,
    Channel,
    DiscordSource,
    IncomingMessage,
    MessageContent,
    MessageTarget,
    OutgoingMessage,
    Sender,
)

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000
QUEUE_SIZE = 1000


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """`text` in pieces of at most `limit` UTF-16 units: at a line break if one falls in
    the second half of a piece, else at a space, else exactly at the limit."""
    pieces: list[str] = []
    rest = text.strip()
    while rest:
        if utf16_len(rest) <= limit:
            pieces.append(rest)
            break
        cut = 0  # the longest prefix that fits
        units = 0
        for i, ch in enumerate(rest):
            units += 2 if ord(ch) > 0xFFFF else 1
            if units > limit:
                cut = i
                break
        head = rest[:cut]
        at = head.rfind("\n")
        if at < cut // 2:
            at = head.rfind(" ")
        if at < cut // 2:
            at = cut
        pieces.append(rest[:at].rstrip())
        rest = rest[at:].lstrip()
    return [p for p in pieces if p]


class DiscordGateway(ChatGateway):
    name: ClassVar[str] = "discord"
    config_model: ClassVar[type[GatewayConfig]] = DiscordConfig

    def __init__(self, config: DiscordConfig, *, client: discord.Client | None = None) -> None:
        super().__init__(config)
        if not config.guild_ids:
            raise ConfigError(
                "gateway.discord.guild_ids is empty: list the servers the bot may answer in",
                key="gateway.discord.guild_ids",
            )
        self.settings = config
        self.guilds = frozenset(config.guild_ids)
        self.channels = frozenset(config.channel_ids)
        if client is None:
            intents = discord.Intents.default()
            intents.message_content = True
            client = discord.Client(intents=intents)
        self.client = client
        self.queue: asyncio.Queue[IncomingMessage] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self._channels: dict[str, Any] = {}  # channel id -> the discord.py channel seen
        self._task: asyncio.Task[None] | None = None
        client.event(self.on_message)

    # ------------------------------------------------------------ the Gateway trait
    async def connect(self) -> None:
        """Log in and listen (in the background)."""
        token = self.settings.token.get_secret_value() if self.settings.token else ""
        if not token or token.startswith("${"):
            raise ConfigError(
                "gateway.discord.token is not set: put the bot token in DISCORD_TOKEN",
                key="gateway.discord.token",
            )
        self._task = asyncio.create_task(self.client.start(token), name="discord")

    async def disconnect(self) -> None:
        await self.client.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def receive(self) -> IncomingMessage:
        return await self.queue.get()

    async def send(self, message: OutgoingMessage) -> None:
        channel_id = message.target.channel_id
        if channel_id is None:
            raise ValueError("a Discord message needs a target channel")
        channel: Any = self._channels.get(channel_id) or self.client.get_channel(int(channel_id))
        if channel is None:
            channel = await self.client.fetch_channel(int(channel_id))
        if not isinstance(channel, discord.abc.Messageable):
            raise ValueError(f"Discord channel {channel_id} does not take messages")
        for piece in split_message(message.content.text):
            await channel.send(piece, allowed_mentions=discord.AllowedMentions.none())

    # ------------------------------------------------------------ conversations
    def agent(self) -> str | None:
        """`[gateway.discord] agent`: who answers (None: the only agent)."""
        return self.settings.agent

    def conversation_key(self, message: IncomingMessage) -> str:
        source = message.source
        assert isinstance(source, DiscordSource)
        return f"{source.guild_id}/{source.channel_id}"

    def reply_target(self, message: IncomingMessage) -> MessageTarget:
        source = message.source
        assert isinstance(source, DiscordSource)
        return MessageTarget(gateway=self.name, channel_id=source.channel_id)

    # ------------------------------------------------------------ discord.py events
    def accepts(self, message: discord.Message) -> bool:
        """Whether the bot answers this message (see the module docstring)."""
        if message.author.bot or message.guild is None:
            return False
        if message.guild.id not in self.guilds:
            return False
        if self.channels and message.channel.id not in self.channels:
            return False
        if self.settings.mention_only:
            me = self.client.user
            return me is not None and any(m.id == me.id for m in message.mentions)
        return bool(message.content.strip() or message.attachments)

    def convert(self, message: discord.Message) -> IncomingMessage:
        """The platform-independent message."""
        assert message.guild is not None
        text = message.content
        me = self.client.user
        if me is not None:  # "<@123> hi" reads as "hi"
            text = re.sub(rf"<@!?{me.id}>\s*", "", text).strip()
        return IncomingMessage(
            id=str(message.id),
            source=DiscordSource(
                guild_id=str(message.guild.id), channel_id=str(message.channel.id)
            ),
            content=MessageContent(
                text=text,
                attachments=[
                    Attachment(url=a.url, content_type=a.content_type, name=a.filename)
                    for a in message.attachments
                ],
            ),
            sender=Sender(
                id=str(message.author.id), name=message.author.display_name, is_bot=False
            ),
            channel=Channel(
                id=str(message.channel.id), name=getattr(message.channel, "name", None)
            ),
            timestamp=message.created_at,
        )

    async def on_message(self, message: discord.Message) -> None:
        if not self.accepts(message):
            return
        incoming = self.convert(message)
        self._channels[str(message.channel.id)] = message.channel
        try:
            self.queue.put_nowait(incoming)
        except asyncio.QueueFull:
            log.warning("discord: %d messages waiting; dropped %s", QUEUE_SIZE, message.id)
