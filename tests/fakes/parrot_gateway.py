"""A chat gateway plugin, "parrot", written as a third party writes one: it imports only
from `opencrab.ext` (and the standard library). Its platform is in memory: `post` a
message in a room, read what was `sent`.

Registered with the plugin manager as a module (`plugin_manager().register(module)`), it
is configured under `[gateway.parrot]` with its own keys (`room_prefix`, `agent`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

from opencrab.ext import (
    ChatGateway,
    ChatSource,
    GatewayConfig,
    IncomingMessage,
    OutgoingMessage,
    Sender,
    hookimpl,
)


class ParrotConfig(GatewayConfig):
    """`[gateway.parrot]`."""

    enabled: bool = False
    agent: str | None = None  # who answers; the only agent when None
    room_prefix: str = "room-"  # how the platform names its rooms


class ParrotGateway(ChatGateway):
    name: ClassVar[str] = "parrot"
    config_model: ClassVar[type[GatewayConfig]] = ParrotConfig
    built: ClassVar[list[ParrotGateway]] = []  # every gateway from_config made

    def __init__(self, config: ParrotConfig) -> None:
        super().__init__(config)
        self.settings = config
        self.inbox: asyncio.Queue[IncomingMessage] = asyncio.Queue()
        self.sent: list[OutgoingMessage] = []
        self.arrived = asyncio.Event()  # set on every send
        self.connected = False

    @classmethod
    def from_config(cls, runtime: Any, config: Any, **options: Any) -> ParrotGateway | None:
        if not config.enabled:
            return None
        gateway = cls(config)
        cls.built.append(gateway)
        return gateway

    async def connect(self) -> None:
        self.connected = True

    async def disconnect(self) -> None:
        self.connected = False

    async def receive(self) -> IncomingMessage:
        return await self.inbox.get()

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)
        self.arrived.set()

    def agent(self) -> str | None:
        return self.settings.agent

    def post(self, text: str, room: str) -> None:
        """Someone writes `text` in `room`."""
        conversation = f"{self.settings.room_prefix}{room}"
        source = ChatSource(gateway=self.name, conversation=conversation)
        self.inbox.put_nowait(IncomingMessage.text(text, source=source, sender=Sender(id="p1")))

    async def next_sent(self, count: int) -> list[OutgoingMessage]:
        """The messages sent so far, once there are at least `count`."""
        while len(self.sent) < count:
            self.arrived.clear()
            await self.arrived.wait()
        return self.sent


@hookimpl
def register_gateways(register: Callable[[Any], None]) -> None:
    register(ParrotGateway)
