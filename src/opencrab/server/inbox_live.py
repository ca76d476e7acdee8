"""The inbox's count, live: every dashboard page's top bar follows it over `/api/ws`.

A client sends `{"type": "inbox.subscribe"}` and gets `{"type": "inbox", "count": N}`
at once and again whenever the count changes. One `InboxCounter` per server counts
(reports/inbox.py `inbox_count`) only while someone follows: when this process writes a
turn step (`nudge`: a call held, a ticket suspended) and otherwise every `poll_secs`, so
items other processes add (a worker's ticket, a decision through another server) show
within that time. Clients are the live feed's (server/live.py): a full outbox drops the
client, never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

from opencrab.server.live import Client

log = logging.getLogger(__name__)

POLL_SECS = 2.0


def count_message(count: int) -> str:
    """The message a follower gets."""
    return json.dumps({"type": "inbox", "count": count})


class InboxCounter:
    """See the module docstring. `run()` until `stop()`."""

    def __init__(
        self, count: Callable[[], Awaitable[int]], *, poll_secs: float = POLL_SECS
    ) -> None:
        self.count = count
        self.poll_secs = poll_secs
        self.clients: set[Client] = set()
        self._new: set[Client] = set()  # followers not told the count yet
        self.last: int | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()

    def add(self, client: Client) -> None:
        """Tell `client` the count now and whenever it changes."""
        self.clients.add(client)
        self._new.add(client)
        self.nudge()

    def remove(self, client: Client) -> None:
        self.clients.discard(client)
        self._new.discard(client)

    def nudge(self) -> None:
        """Something was written: count now instead of at the next poll."""
        self._wake.set()

    async def look(self) -> None:
        """Count, and tell the followers who do not know it yet."""
        self.clients = {c for c in self.clients if not c.closed.is_set()}
        if not self.clients:
            self.last = None
            return
        count = await self.count()
        told = self.clients if count != self.last else self._new & self.clients
        self.last = count
        self._new.clear()
        message = count_message(count)
        for client in list(told):
            if not client.offer(message):
                self.remove(client)

    async def run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_secs)
            self._wake.clear()
            try:
                await self.look()
            except Exception:  # the count must outlive a bad read
                log.exception("inbox count: counting failed")

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
