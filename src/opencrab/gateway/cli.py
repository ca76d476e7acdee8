"""The CLI gateway (seed `MessageSource::Cli`): a terminal conversation with one agent.

`receive` reads a line from the input stream (a daemon thread reads it, so the event
loop keeps running and leaving never waits for a line that will not come); `/quit`,
`/exit` or end of input ends the conversation with EOFError; `/help` lists these commands
(it is not sent to the agent). A line the message rules refuse (too long) is not sent:
the user is told why. `send` writes a reply;
`write_delta` streams text as the model produces it.

Example:
    gateway = CliGateway(session_id=session_id)
    await gateway.connect()
    message = await gateway.receive()        # IncomingMessage with CliSource
    await gateway.send(OutgoingMessage(...))
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import ClassVar, TextIO

from opencrab.gateway.base import Gateway, GatewayConfig
from opencrab.messages import (
    CliSource,
    IncomingMessage,
    OutgoingMessage,
    Sender,
    message_problem,
)

QUIT_COMMANDS = frozenset({"/quit", "/exit", "/q"})
HELP_COMMANDS = frozenset({"/help", "/?"})
HELP = (
    "Commands (anything else is sent to the agent):\n"
    "  /help, /?            this list\n"
    "  /quit, /exit, /q     leave the chat (so does end of input, Ctrl-D)\n"
    "  Ctrl-C               stop the reply being written; twice to leave\n"
)


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
        self._lines: asyncio.Queue[str] | None = None

    async def connect(self) -> None:
        self.connected = True

    async def disconnect(self) -> None:
        self.connected = False

    def _start_reader(self) -> asyncio.Queue[str]:
        """A daemon thread that hands every input line (and "" at the end) to the loop.

        A real file descriptor is read with os.read, never through the buffered stdin
        object: a daemon thread blocked inside it would hold its lock while the
        interpreter shuts down, and Python aborts then.
        """
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str] = asyncio.Queue()

        def put(line: str) -> bool:
            try:
                loop.call_soon_threadsafe(lines.put_nowait, line)
            except RuntimeError:  # the loop is closed: nobody listens any more
                return False
            return bool(line)

        try:
            fd: int | None = self.stdin.fileno()
        except (OSError, ValueError):  # an in-memory stream (tests, embedding)
            fd = None
        encoding = getattr(self.stdin, "encoding", None) or "utf-8"

        def read_fd(fd: int) -> None:
            pending = b""
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    if pending:
                        put(pending.decode(encoding, errors="replace"))
                    put("")
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if not put(line.decode(encoding, errors="replace") + "\n"):
                        return

        def read_stream() -> None:
            while True:
                try:
                    line = self.stdin.readline()
                except (OSError, ValueError):
                    line = ""
                if not put(line):
                    return

        target = read_stream if fd is None else (lambda: read_fd(fd))
        threading.Thread(target=target, name="cli-input", daemon=True).start()
        return lines

    async def receive(self) -> IncomingMessage:
        """The next line that follows the message rules; EOFError on /quit or end of input."""
        if self._lines is None:
            self._lines = self._start_reader()
        while True:
            if self.prompt and self.stdin.isatty():
                self.stdout.write(self.prompt)
                self.stdout.flush()
            line = await self._lines.get()
            if not line:
                self._lines.put_nowait("")  # stays at the end
                raise EOFError("end of input")
            text = line.strip()
            if text.lower() in QUIT_COMMANDS:
                raise EOFError(text)
            if not text:
                continue
            if text.lower() in HELP_COMMANDS:
                self.stdout.write(HELP)
                self.stdout.flush()
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
