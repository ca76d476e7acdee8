"""An in-memory chat platform behind a real `ChatGateway`, as a plugin would register it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

from opencrab.gateway.serve import ChatGateway
from opencrab.messages import (
    IncomingMessage,
    MessageTarget,
    OutgoingMessage,
    Sender,
    SlackSource,
)
from opencrab.plugins import hookimpl


class MemoryChat(ChatGateway):
    """Slack-shaped conversations kept in memory: `post` a message, read `sent` replies."""

    name: ClassVar[str] = "memchat"

    def __init__(self, agent: str | None = None) -> None:
        super().__init__()
        self.answering = agent
        self.inbox: asyncio.Queue[IncomingMessage] = asyncio.Queue()
        self.sent: list[OutgoingMessage] = []
        self.replied = asyncio.Event()
        self.connected = asyncio.Event()
        self.disconnected = False

    async def connect(self) -> None:
        self.connected.set()

    async def disconnect(self) -> None:
        self.disconnected = True

    async def receive(self) -> IncomingMessage:
        return await self.inbox.get()

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)
        self.replied.set()

    def post(self, text: str, channel: str = "C1") -> None:
        """A user writes `text` in `channel`."""
        self.inbox.put_nowait(
            IncomingMessage.text(
                text,
                source=SlackSource(workspace_id="W1", channel_id=channel),
                sender=Sender(id="U1", name="Mina"),
            )
        )

    def conversation_key(self, message: IncomingMessage) -> str:
        source = message.source
        assert isinstance(source, SlackSource)
        return f"{source.workspace_id}/{source.channel_id}"

    def reply_target(self, message: IncomingMessage) -> MessageTarget:
        source = message.source
        assert isinstance(source, SlackSource)
        return MessageTarget(gateway=self.name, channel_id=source.channel_id)

    def agent(self) -> str | None:
        return self.answering


class MemoryChatPlugin:
    """A plugin registering gateways by name: each factory's result, or None (off)."""

    def __init__(self, **gateways: Any) -> None:
        self.gateways = gateways
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    @hookimpl
    def register_gateways(self, register: Callable[[str, Callable[..., Any]], None]) -> None:
        for name, gateway in self.gateways.items():
            register(name, self._factory(name, gateway))

    def _factory(self, name: str, gateway: Any) -> Callable[..., Any]:
        def factory(runtime: Any, **options: Any) -> Any:
            self.calls.append((name, runtime, options))
            return gateway

        return factory
