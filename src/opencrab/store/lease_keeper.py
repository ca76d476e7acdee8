"""The leases one process holds: taken, renewed while the work runs, let go of.

A LeaseKeeper serves two kinds of work:
- Held for a while (a turn): `holding(key)` takes the lease or raises, and lets go when
  the block ends; `acquire_some(keys)` takes several at once (the ticket scheduler's
  claims: one transaction for however many tickets it starts).
- Wanted for as long as the process runs (an agent's heartbeat): `want(key)` and the
  keeper keeps trying to take it; `holds(key)` says whether the work may run now.
Every `ttl_secs / 3` one pass off the event loop (passes never overlap) renews every
held lease (a pass that comes sooner renews only those renewed ttl/3 ago or longer),
tries to take the wanted ones it does not hold (another process's are taken once theirs
expires, or at once when that process is gone) and lets go of the unwanted (store.leases:
a pass of a process holding nothing is one read while nothing is free; a holder's
renewals are one UPDATE).

The wanted work is shared fairly: a keeper that wants leases holds a member lease
(`member:<owner>`), and the live member leases say among how many processes the work is
shared. A keeper holds at most its fair share, ceil(wanted / members): over it (a process
joined), it lets go of the excess at once, and the newcomer takes it at its next pass;
under it, it takes free leases up to its share. A lease found free at two passes in a
row is taken whatever the share (so nothing stays unheld because a member died or wants
other work); a process that closes lets go of all, and the others' shares grow. While
the shares settle (for ttl/3 and two settle passes after the number of members changed:
the others let go of their excess at their next pass), a keeper with room in its share
passes every `settle_secs` (1 s) instead of every ttl/3, so a lease let go of is taken
again within about a second, not ten. So does a keeper that has just joined, room or
not: processes started at the same moment each see themselves alone at their first pass
and the first to write takes everything; its next pass, a second later, sees the others
and lets go of their shares.

`held_for(key)` says how long this process has held a lease without a break, so work on
a schedule (heartbeat slots) can leave a slot due before the handover to the previous
holder. A lease counts as held only until the ttl since the start of its last successful
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
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager

from opencrab.offload import run_blocking
from opencrab.store.leases import PROCESS_OWNER, LeaseStore, member_key

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
        share: bool = True,
        settle_secs: float = 1.0,
    ) -> None:
        self.store = store
        self.owner = owner
        self.ttl_secs = ttl_secs
        self.clock = clock
        self.share = share  # False: take every wanted lease that is free (no member lease)
        self.member = member_key(owner)
        self._held: dict[str, float] = {}  # key -> until when it counts as held (clock)
        self._since: dict[str, float] = {}  # key -> since when it is held without a break
        self._free_before: set[str] = set()  # wanted keys found free at the last pass
        self.settle_secs = settle_secs
        self._members = 0  # the live members the last pass counted
        self._settling_until = float("-inf")  # (clock) passes every settle_secs until then
        self._joined_until = float("-inf")  # (clock) … even with no room, having just joined
        self._share = 0  # how many of the wanted leases it may hold (at the last pass)
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

    def held_for(self, key: str) -> float:
        """Seconds this process has held `key`'s lease without a break (0 when not held)."""
        if not self.holds(key):
            return 0.0
        return self.clock() - self._since[key]

    def _hold(self, key: str, until: float) -> None:
        self._held[key] = until
        self._since.setdefault(key, self.clock())

    def _drop(self, key: str) -> None:
        self._held.pop(key, None)
        self._since.pop(key, None)

    async def acquire(self, key: str) -> bool:
        """Take `key`'s lease now (renewed from then on); False when another process has it."""
        started = self.clock()
        self._taking = True
        taken = await self.store.db.run(self.store.try_acquire, key, self.owner, self.ttl_secs)
        if taken:
            self._hold(key, started + self.ttl_secs)
        return taken

    async def acquire_some(self, keys: Collection[str]) -> set[str]:
        """Take every one of `keys`' leases no other process holds, in one transaction
        (a read and a write, however many); the keys taken, each renewed from then on."""
        if not keys:
            return set()
        started = self.clock()
        self._taking = True
        taken = await self.store.db.run(self.store.acquire, keys, self.owner, self.ttl_secs)
        for key in taken:
            self._hold(key, started + self.ttl_secs)
        return taken

    async def release(self, key: str) -> None:
        """Let go of `key`'s lease now."""
        self._drop(key)
        self._wanted.discard(key)
        await self.store.db.run(self.store.release, [key], self.owner)

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
        if self.share and self._wanted:
            if self.member not in held:
                wanted.add(self.member)
            await self._fair_share(held, wanted, drop)
        elif self.member in held:  # nothing wanted any more: no longer a member
            held.discard(self.member)
            drop.add(self.member)
        # a turn's lease is only renewed, never taken: its turn may let go of it meanwhile
        renew = self._due(held, started)
        got = await run_blocking(
            self.store.exchange, self.owner, self.ttl_secs, take=wanted, renew=renew, release=drop
        )
        self.passes += 1
        for key in drop:  # its row is gone; wanted again meanwhile, the next pass takes it
            self._drop(key)
            self._unwanted.discard(key)
        for key in wanted | renew:
            if key not in got:
                self._drop(key)  # another process holds it
            elif key in self._held or key in self._wanted or key == self.member:
                self._hold(key, started + self.ttl_secs)  # (not let go of meanwhile)

    def _due(self, held: set[str], started: float) -> set[str]:
        """The held leases to renew at a pass starting at `started`: those renewed ttl/3
        ago or longer, and the member lease (its renewal also clears dead members' rows).
        A pass that comes sooner (a settle pass, one woken by `want`) leaves the others be:
        the passes after it come at most ttl/3 apart, so each is renewed well within its
        ttl."""
        renewed_by = started - self.ttl_secs / 3  # renewed before then: due
        due = {key for key in held if key == self.member}
        for key in held - due:
            until = self._held.get(key)  # None: let go of while the pass waited (a run ended)
            if until is not None and until - self.ttl_secs <= renewed_by:
                due.add(key)
        return due

    async def _fair_share(self, held: set[str], wanted: set[str], drop: set[str]) -> None:
        """Narrow this pass to this process's fair share of the wanted leases: `wanted`
        (to take) keeps the free ones up to the share, and the ones free at two passes in
        a row; over the share, the excess moves from `held` to `drop` and is no longer
        held from now on (before its release is written: the next holder may start)."""
        mine = held & self._wanted
        members, free = await run_blocking(
            self.store.share_view, self.owner, wanted - {self.member}
        )
        joining = self.member in wanted  # its member lease is not written yet
        members += joining
        share = math.ceil(len(self._wanted) / max(members, 1))
        if members != self._members:  # the others let go at their next pass (ttl/3 at most)
            self._settling_until = self.clock() + self.ttl_secs / 3 + 2 * self.settle_secs
        if joining:  # others starting now may not be counted yet
            self._joined_until = self._settling_until
        self._members = members
        self._share = share
        if len(mine) > share:
            excess = random.sample(sorted(mine), len(mine) - share)
            for key in excess:
                self._drop(key)
            held.difference_update(excess)
            drop.update(excess)
            chosen: set[str] = set()
        else:
            orphans = free & self._free_before
            rest = sorted(free - orphans)
            room = max(share - len(mine) - len(orphans), 0)
            chosen = orphans | set(random.sample(rest, min(room, len(rest))))
        self._free_before = free - chosen
        wanted.intersection_update(chosen | {self.member})

    def next_pass_in(self) -> float:
        """Seconds from the end of a pass to the next: ttl/3, or settle_secs while the
        shares settle and this keeper has room in its share or has just joined."""
        now = self.clock()
        if now < self._settling_until and (
            now < self._joined_until or self._share > sum(self.holds(k) for k in self._wanted)
        ):
            return min(self.settle_secs, self.ttl_secs / 3)
        return self.ttl_secs / 3

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
            alarm = loop.call_later(self.next_pass_in(), self._wake.set)
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
        self._since.clear()
        self._wanted.clear()
        self._unwanted.clear()
        if self._taking:  # (a process that never leased anything needs no write)
            await run_blocking(self.store.release_all, self.owner)
