"""The unified Gateway interface of seed 001 ("Gateway Trait").

Every way into an agent (REST, WebSocket, CLI, Discord, …) turns what it receives into an
`IncomingMessage` and sends `OutgoingMessage`s back (the message types live in
`opencrab.messages`); adding Slack or LINE later means one new adapter module implementing
`Gateway`, registered through the `register_gateways` plugin hook (opencrab.plugins).

Example:
    class EchoGateway(Gateway):
        name = "echo"

        async def connect(self) -> None: ...
        async def disconnect(self) -> None: ...
        async def receive(self) -> IncomingMessage:
            return IncomingMessage.text("hi", source=CliSource(session_id="s1"))
        async def send(self, message: OutgoingMessage) -> None:
            print(message.content.text)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from opencrab.messages import IncomingMessage, OutgoingMessage


class GatewayConfig(BaseModel):
    """What every gateway is configured with; adapters extend it."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True


class Gateway(ABC):
    """One way in and out (seed `Gateway` trait): name, receive, send, connect, disconnect."""

    name: ClassVar[str]

    def __init__(self, config: GatewayConfig | None = None) -> None:
        self._config = config or GatewayConfig()

    def config(self) -> GatewayConfig:
        """The gateway's own settings."""
        return self._config

    @abstractmethod
    async def connect(self) -> None:
        """Start listening (open sockets, log in)."""

    @abstractmethod
    async def disconnect(self) -> None:
        """Stop listening and release everything."""

    @abstractmethod
    async def receive(self) -> IncomingMessage:
        """The next message; waits until one arrives."""

    @abstractmethod
    async def send(self, message: OutgoingMessage) -> None:
        """Deliver a message to its target."""
