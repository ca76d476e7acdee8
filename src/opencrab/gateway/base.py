"""The unified Gateway interface of seed 001 ("Gateway Trait").

Every way into an agent (REST, WebSocket, CLI, Discord, …) turns what it receives into an
`IncomingMessage` and sends `OutgoingMessage`s back (the message types live in
`opencrab.messages`); adding Slack or LINE later means one new adapter module implementing
`Gateway`, registered through the `register_gateways` plugin hook (opencrab.plugins).
A gateway declares the model of its `[gateway.<name>]` table (`config_model`, a
`GatewayConfig`); the config checks that table against it, and `from_config` builds the
gateway from the checked table.

Example:
    class EchoConfig(GatewayConfig):
        enabled: bool = False
        greeting: str = "hi"

    class EchoGateway(Gateway):
        name = "echo"
        config_model = EchoConfig

        async def connect(self) -> None: ...
        async def disconnect(self) -> None: ...
        async def receive(self) -> IncomingMessage:
            source = ChatSource(gateway="echo", conversation="c1")
            return IncomingMessage.text(self.config().greeting, source=source)
        async def send(self, message: OutgoingMessage) -> None:
            print(message.content.text)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict

from opencrab.messages import IncomingMessage, OutgoingMessage


class GatewayConfig(BaseModel):
    """What every gateway is configured with (its `[gateway.<name>]` table); a gateway's
    own model extends it. Unknown keys are errors, naming the key."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = True


class Gateway(ABC):
    """One way in and out (seed `Gateway` trait): name, receive, send, connect, disconnect."""

    name: ClassVar[str]
    config_model: ClassVar[type[GatewayConfig]] = GatewayConfig
    """The model of the gateway's `[gateway.<name>]` table."""

    @classmethod
    def from_config(cls, runtime: Any, config: Any, **options: Any) -> Self | None:
        """The gateway as `config` (its checked table) sets it up; None when it is off.

        `runtime` is the process's opencrab.core.runtime.Runtime; `options` are what a
        caller adds (a terminal for the CLI's). This default builds `cls(config)` when the
        table says `enabled = true`.
        """
        return cls(config) if config.enabled else None

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
