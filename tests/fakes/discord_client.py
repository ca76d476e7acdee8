"""A discord.py client that never connects: real discord.py objects, sending stubbed at
its HTTP client (`http.send_message`), so discord.py's own send code runs and nothing
leaves the machine."""

from __future__ import annotations

from typing import Any

import discord

GUILD, OTHER_GUILD, CHANNEL, OTHER_CHANNEL, BOT = 111, 999, 222, 223, 1


class FakeDiscord:
    """A discord.py client that is never started, with a guild, channels and a send log."""

    def __init__(self) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        self.client = discord.Client(intents=intents)
        self.state = self.client._connection
        self.sent: list[tuple[int, dict[str, Any]]] = []
        self._ids = iter(range(10_000, 99_999))

        async def send_message(channel_id: int, *, params: Any) -> dict[str, Any]:
            self.sent.append((int(channel_id), dict(params.payload)))
            return self.payload(channel_id, params.payload.get("content"), author=BOT)

        self.client.http.send_message = send_message  # type: ignore[method-assign]

    def guild(self, guild_id: int) -> discord.Guild:
        data: Any = {"id": str(guild_id), "name": "garden", "owner_id": "5", "roles": []}
        return discord.Guild(data=data, state=self.state)

    def channel(self, guild: discord.Guild, channel_id: int) -> discord.TextChannel:
        data: Any = {"id": str(channel_id), "type": 0, "name": "general", "position": 0}
        return discord.TextChannel(state=self.state, guild=guild, data=data)

    def payload(
        self, channel_id: int, content: str, *, author: int = 444, bot: bool = False
    ) -> dict[str, Any]:
        return {
            "id": str(next(self._ids)),
            "channel_id": str(channel_id),
            "type": 0,
            "content": content,
            "author": {
                "id": str(author),
                "username": "mina",
                "global_name": "Mina",
                "discriminator": "0",
                "avatar": None,
                "bot": bot,
            },
            "attachments": [],
            "embeds": [],
            "mentions": [],
            "mention_roles": [],
            "pinned": False,
            "mention_everyone": False,
            "tts": False,
            "timestamp": "2026-11-23T09:00:00+00:00",
            "edited_timestamp": None,
        }

    def message(
        self,
        content: str,
        *,
        guild: int = GUILD,
        channel: int = CHANNEL,
        bot: bool = False,
    ) -> discord.Message:
        where = self.channel(self.guild(guild), channel)
        data: Any = self.payload(channel, content, bot=bot)
        return discord.Message(state=self.state, channel=where, data=data)
