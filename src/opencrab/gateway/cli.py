"""The CLI gateway (seed `MessageSource::Cli`): a terminal conversation with one agent.

`receive` reads a line from the input stream (in a worker thread, so the event loop
keeps running); `/quit`, `/exit` or end of input ends the conversation with EOFError.
A line the message rules refuse (too long) is not sent: the user is told why.
`send` writes a reply; `write_delta` streams text as the model produces it.

Example:
    gateway = CliGateway(session_id=session_id)
    await gateway.connect()
    message = await gateway.receive()        # IncomingMessage with CliSource
    await gateway.send(OutgoingMessage(...))
"""

from __future__ import annotations

import asyncio
import sys
from typing import ClassVar, TextIO

from opencrab.gateway.base import (
    CliSource,
    Gateway,
    GatewayConfig,
    IncomingMessage,
    OutgoingMessage,
    Sender,
    message_problem,
)

QUIT_COMMANDS = frozenset({"/quit", "/exit", "/q"})


class CliGateway(Gateway):
    name: ClassVar[str] = "cli"

    def __init__(
        self,
        *,
        session_id: str,
        user: str = "user",
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        prompt: str = "> ",
        config: GatewayConfig | None = None,
    ) -> None:
        super().__init__(config)
        self.session_id = session_id
        self.user = user
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.prompt = prompt
        self.connected = False

    async def connect(self) -> None:
        self.connected = True

    async def disconnect(self) -> None:
        self.connected = False

    async def receive(self) -> IncomingMessage:
        """The next line that follows the message rules; EOFError on /quit or end of input."""
        while True:
            if self.prompt and self.stdin.isatty():
                self.stdout.write(self.prompt)
                self.stdout.flush()
            line = await asyncio.to_thread(self.stdin.readline)
            if not line:
                raise EOFError("end of input")
            text = line.strip()
            if text.lower() in QUIT_COMMANDS:
                raise EOFError(text)
            if not text:
                continue
            problem = message_problem(text)
            if problem is not None:
                self.stdout.write(f"(not sent: {problem})\n")
                self.stdout.flush()
            else:
                return IncomingMessage.text(
                    text,
                    source=CliSource(session_id=self.session_id),
                    sender=Sender(id=self.user, name=self.user),
                )

    async def send(self, message: OutgoingMessage) -> None:
        self.stdout.write(message.content.text.rstrip("\n") + "\n")
        self.stdout.flush()

    def write_delta(self, text: str) -> None:
        """Part of a reply as it streams in."""
        self.stdout.write(text)
        self.stdout.flush()
