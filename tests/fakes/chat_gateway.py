"""An in-memory chat platform behind a real `ChatGateway`, as a plugin would register it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

from opencrab.gateway.base import GatewayConfig
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
    """A plugin registering gateways by name, each built as the given object (None: off),
    with the default `GatewayConfig` as its table's model."""

    def __init__(self, **gateways: Any) -> None:
        self.gateways = gateways
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    @hookimpl
    def register_gateways(self, register: Callable[[Any], None]) -> None:
        for name, gateway in self.gateways.items():
            register(self._registration(name, gateway))

    def _registration(self, name: str, gateway: Any) -> type:
        calls = self.calls

        class Registered:
            config_model = GatewayConfig

            @staticmethod
            def from_config(runtime: Any, config: Any, **options: Any) -> Any:
                calls.append((name, runtime, options))
                return gateway

        Registered.name = name  # type: ignore[attr-defined]
        return Registered
