"""The leases one process holds: taken, renewed while the work runs, let go of.

A LeaseKeeper serves two kinds of work:
- Held for a while (a turn): `holding(key)` takes the lease or raises, and lets go when
  the block ends.
- Wanted for as long as the process runs (an agent's heartbeat): `want(key)` and the
  keeper keeps trying to take it; `holds(key)` says whether the work may run now.
Every `ttl_secs / 3` one pass off the event loop (passes never overlap) renews every
held lease, tries to take the wanted ones it does not hold (another process's are taken
once theirs expires) and lets go of the unwanted (store.leases: a pass of a process
holding nothing is one read while nothing is free; a holder's renewals are one UPDATE).
A lease counts as held only until the ttl since the start of its last successful
renewal runs out, measured on this process's monotonic clock: a process whose renewals
stall stops working before another process may take over. `close()` lets go of all of
them (a clean shutdown).

Example:
    keeper = LeaseKeeper(LeaseStore(db), ttl_secs=30)
    keeper.start()
    async with keeper.holding(turn_key(session_id), busy=lambda: SessionBusy(session_id)):
        ...  # the turn; its lease is renewed meanwhile
    keeper.want(heartbeat_key(agent_id))
    if keeper.holds(heartbeat_key(agent_id)):
        ...  # tick
    await keeper.close()
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from opencrab.offload import run_blocking
from opencrab.store.leases import PROCESS_OWNER, LeaseStore

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Takes, renews and lets go of this process's leases (see the module docstring)."""

    def __init__(
        self,
        store: LeaseStore,
        *,
        owner: str = PROCESS_OWNER,
        ttl_secs: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.owner = owner
        self.ttl_secs = ttl_secs
        self.clock = clock
        self._held: dict[str, float] = {}  # key -> until when it counts as held (clock)
        self._wanted: set[str] = set()
        self._unwanted: set[str] = set()  # to let go of at the next pass
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._passing = asyncio.Lock()
        self._closing = False
        self._taking = False  # set once this keeper tries to take a lease
        self.passes = 0

    # ------------------------------------------------------------ held for a while
    def holds(self, key: str) -> bool:
        """True while this process holds `key`'s lease (renewed in time, not let go of)."""
        until = self._held.get(key)
        return until is not None and key not in self._unwanted and self.clock() < until

    async def acquire(self, key: str) -> bool:
        """Take `key`'s lease now (renewed from then on); False when another process has it."""
        started = self.clock()
        self._taking = True
        taken = await run_blocking(self.store.try_acquire, key, self.owner, self.ttl_secs)
        if taken:
            self._held[key] = started + self.ttl_secs
        return taken

    async def release(self, key: str) -> None:
        """Let go of `key`'s lease now."""
        self._held.pop(key, None)
        self._wanted.discard(key)
        await run_blocking(self.store.release, [key], self.owner)

    @asynccontextmanager
    async def holding(self, key: str, *, busy: Callable[[], Exception]) -> AsyncIterator[None]:
        """Hold `key`'s lease for the block; raises `busy()` when another process has it."""
        if not await self.acquire(key):
            raise busy()
        try:
            yield
        finally:
            await self.release(key)

    # ------------------------------------------------------------ wanted while running
    def want(self, key: str) -> None:
        """Keep trying to hold `key`'s lease (taken at the next pass, which comes at once)."""
        self._wanted.add(key)
        self._unwanted.discard(key)
        self._wake.set()

    def unwant(self, key: str) -> None:
        """Stop wanting `key`'s lease; it is let go of at the next pass (which comes at once)."""
        self._wanted.discard(key)
        if key in self._held:
            self._unwanted.add(key)
            self._wake.set()

    # ------------------------------------------------------------ the renewing task
    def start(self) -> None:
        """Run the renewing passes in the background of the running event loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def run_pass(self) -> None:
        """Renew what is held, take what is wanted, let go of the unwanted (one transaction).

        Passes never overlap: one asked for while another runs (a caller's beside the
        background task's) waits for it, so no pass acts on what another is changing.
        """
        async with self._passing:
            await self._pass()

    async def _pass(self) -> None:
        started = self.clock()
        drop = set(self._unwanted)
        held = set(self._held) - drop
        wanted = set(self._wanted) - held  # the held ones are renewed, not taken again
        self._taking = self._taking or bool(self._wanted)
        # a turn's lease is only renewed, never taken: its turn may let go of it meanwhile
        got = await run_blocking(
            self.store.exchange, self.owner, self.ttl_secs, take=wanted, renew=held, release=drop
        )
        self.passes += 1
        for key in drop:  # its row is gone; wanted again meanwhile, the next pass takes it
            self._held.pop(key, None)
            self._unwanted.discard(key)
        for key in wanted | held:
            if key not in got:
                self._held.pop(key, None)  # another process holds it
            elif key in self._held or key in self._wanted:  # (not let go of meanwhile)
                self._held[key] = started + self.ttl_secs

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            try:
                await self.run_pass()
            except Exception:
                log.exception("renewing leases failed; trying again")
            if self._closing:
                return
            # not asyncio.wait_for: on 3.11 it swallows a cancellation that comes as the
            # wait ends, and a task that was cancelled would then run on for ever
            alarm = loop.call_later(self.ttl_secs / 3, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                alarm.cancel()

    async def close(self) -> None:
        """Stop renewing (a pass under way finishes) and let go of every lease this
        process holds."""
        self._closing = True  # a flag, not cancel(): a pass under way ends first
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        self._held.clear()
        self._wanted.clear()
        self._unwanted.clear()
        if self._taking:  # (a process that never leased anything needs no write)
            await run_blocking(self.store.release_all, self.owner)
