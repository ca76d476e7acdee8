"""The schedule scheduler (docs/architecture.md, "Leases"): every slot of every schedule
runs once across the processes sharing the database.

`opencrab up` and `opencrab worker` each run one (`[schedules] enabled`). It keeps every
schedule that is not paused in a heap by its next slot and sleeps until the earliest: a
run starts at its slot, not at the next poll. Whether the schedules changed (created,
paused, resumed, deleted by any process) is one indexed read every `[schedules]
refresh_secs`; only then are they read again. A slot that comes due is

1. claimed under the schedule's lease (`schedule:<id>`, store/leases.py): a process that
   cannot take it leaves the slot to the holder. Holding it, the process records the
   runs of that schedule still `running` as `abandoned` (their process died: a run's
   lease is taken before its row is written and let go of after its end is), checks the
   agent's and the fleet's budgets, and claims the slot in one transaction
   (store/repositories/schedules.claim_slot: the schedule's last slot moves forward only
   from an earlier one, and a run row is unique per slot), so a slot is recorded once
   however many processes see it due;
2. run: the action (schedules/runs.py's `carry_out`) — a turn, a ticket, a post to a
   gateway channel — and its end recorded (status, cost, the session or ticket it made);
3. a slot found due more than `[schedules] late_grace_secs` after its time (no process
   ran, or this one was busy) follows the schedule's `catchUp`: `once` runs it now (one
   run for the latest missed slot, whatever the number missed), `skip` records it as
   skipped; the earlier missed slots are never run. A slot due while the schedule's
   previous run is still going is recorded as skipped; a spent budget too.

Runs recorded as running whose lease nobody holds (a process killed mid-run) are also
looked for every lease_ttl/3, for the schedules no slot of which is due again soon.

Example:
    scheduler = ScheduleScheduler(runtime)
    scheduler.start()
    ...
    await scheduler.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from opencrab.config.models import SchedulesSection
from opencrab.core.budgets import Budgets
from opencrab.core.runtime import Runtime
from opencrab.errors import ConflictError, NotFoundError
from opencrab.offload import run_blocking
from opencrab.schedules import service
from opencrab.schedules.runs import carry_out
from opencrab.schedules.spec import latest_slot, next_slot
from opencrab.store.leases import schedule_key
from opencrab.store.repositories import schedules as repo
from opencrab.store.repositories.schedules import RunEnd, ScheduleRow

log = logging.getLogger(__name__)

CLAIMING = ""  # `active`'s value while a slot of the schedule is being claimed here
LATENESS_KEPT = 10_000  # the latest on-time starts' lateness kept for `lateness()`


@dataclass(frozen=True)
class Claimed:
    """A run this process claimed: its id, the schedule and the slot."""

    run_id: str
    schedule: ScheduleRow
    slot: datetime
    trigger: str
    status: str = "running"  # or skipped (the catch-up policy, a spent budget)


class ScheduleScheduler:
    """Runs schedules' slots by lease (see the module docstring)."""

    def __init__(
        self,
        runtime: Runtime,
        section: SchedulesSection | None = None,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.runtime = runtime
        self.section = section or runtime.settings.schedules
        self.wall = wall
        self.schedules: dict[str, ScheduleRow] = {}
        self._heap: list[tuple[float, int, str, datetime]] = []  # (due, entry, id, slot)
        self._entry: dict[str, int] = {}  # schedule id -> its live heap entry
        self._seq = itertools.count()
        self._mark: tuple[int, datetime | None] | None = None
        self.active: dict[str, str] = {}  # schedule id -> the run id it runs here now
        self.tasks: set[asyncio.Task[None]] = set()
        # one claim at a time per schedule, in the order its slots came due (FIFO locks)
        self._claiming: dict[str, asyncio.Lock] = {}
        self.lateness_secs: deque[float] = deque(maxlen=LATENESS_KEPT)
        self.claims = 0  # runs this process recorded (any status)
        self.elsewhere = 0  # due slots another process held the lease of
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Run the scheduler in the background of the running event loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="schedules")

    def changed(self) -> None:
        """Read the schedules again now (one was created, paused or deleted here)."""
        self._mark = None
        self._wake.set()

    async def stop(self) -> None:
        """Stop; runs under way are cancelled and recorded as failed ("stopped")."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        refresh = self.section.refresh_secs
        sweep_every = self.runtime.settings.database.lease_ttl_secs / 3
        next_refresh = next_sweep = 0.0
        while not self._stopping.is_set():
            self._wake.clear()
            now = time.monotonic()
            try:
                if now >= next_refresh or self._mark is None:
                    await self.refresh()
                    next_refresh = now + refresh
                if now >= next_sweep:
                    await self.sweep()
                    next_sweep = now + sweep_every
            except Exception:
                log.exception("reading the schedules failed; trying again")
            delay = self.fire_due()
            wait = min(refresh, max(0.0, next_refresh - time.monotonic()))
            if delay is not None:
                wait = min(wait, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(wait, 0.0))

    # ------------------------------------------------------------ following the schedules
    async def refresh(self) -> bool:
        """Read the schedules again when they changed; True when they were."""
        db = self.runtime.db

        def read() -> tuple[tuple[int, datetime | None], list[ScheduleRow] | None]:
            with db.read() as conn:
                mark = repo.change_mark(conn)
                if mark == self._mark:
                    return mark, None
                return mark, repo.active_schedules(conn)

        mark, rows = await run_blocking(read)
        if rows is None:
            return False
        self._mark = mark
        self.follow(rows)
        return True

    def follow(self, rows: list[ScheduleRow]) -> None:
        """Wait for `rows` (every active schedule): new and changed ones get their next
        due time, unchanged ones keep theirs, missing ones are dropped."""
        listed = {row.id: row for row in rows}
        for gone in self.schedules.keys() - listed.keys():
            del self.schedules[gone]
            self._entry.pop(gone, None)
        now = self.wall()
        at = datetime.fromtimestamp(now, UTC)
        for schedule_id, row in listed.items():
            known = self.schedules.get(schedule_id)
            if known is not None and known.updated_at == row.updated_at:
                continue
            self.schedules[schedule_id] = row
            missed = latest_slot(row, at)
            if missed is not None and (row.last_slot is None or missed > row.last_slot):
                self._push(schedule_id, missed)  # due now: late or on time
            else:
                self._push_next(row, at)

    def _push(self, schedule_id: str, slot: datetime) -> None:
        entry = next(self._seq)
        self._entry[schedule_id] = entry
        heapq.heappush(self._heap, (slot.timestamp(), entry, schedule_id, slot))

    def _push_next(self, row: ScheduleRow, after: datetime) -> None:
        upcoming = next_slot(row, after)
        if upcoming is None:
            self._entry.pop(row.id, None)  # a one-shot schedule past its time
            return
        self._push(row.id, upcoming)

    def next_due_in(self) -> float | None:
        """Seconds until the earliest slot this process waits for (None: none)."""
        while self._heap and self._entry.get(self._heap[0][2]) != self._heap[0][1]:
            heapq.heappop(self._heap)  # removed or re-added since
        return None if not self._heap else max(0.0, self._heap[0][0] - self.wall())

    # ------------------------------------------------------------ due slots
    def fire_due(self) -> float | None:
        """Start a claim for every slot due now; seconds until the next is due.

        A slot found due within `late_grace_secs` of its time is claimed as on time, and
        the next slot is waited for from it (so a process that was busy for a moment
        still records each slot); one found later follows the catch-up policy for the
        latest slot due, and the slots before it are passed by.
        """
        while True:
            delay = self.next_due_in()
            if delay is None or delay > 0.0005:
                return delay
            due, _, schedule_id, slot = heapq.heappop(self._heap)
            row = self.schedules[schedule_id]
            now = self.wall()
            if now - due <= self.section.late_grace_secs:
                self._push_next(row, slot)
                self._spawn(self.claim_and_run(row, slot, "slot"))
                continue
            at = datetime.fromtimestamp(now, UTC)
            latest = latest_slot(row, at) or slot
            self._push_next(row, at)
            self._spawn(self.claim_and_run(row, latest, "late"))

    def _lock(self, schedule_id: str) -> asyncio.Lock:
        lock = self._claiming.get(schedule_id)
        if lock is None:
            lock = self._claiming[schedule_id] = asyncio.Lock()
        return lock

    def _spawn(self, work: object) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)  # type: ignore[arg-type]
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def claim_and_run(self, row: ScheduleRow, slot: datetime, trigger: str) -> str | None:
        """Claim `slot` of the schedule by lease and run it; the run's id (None: another
        process has it, or it was claimed already)."""
        if row.id in self.active:  # its previous run is still claimed or going on here
            await self._record_skip(row, slot, trigger, "the previous run was still going")
            return None
        self.active[row.id] = CLAIMING
        key = schedule_key(row.id)
        try:
            if not await self.runtime.leases.acquire(key):
                self.elsewhere += 1
                return None
            try:
                claimed = await self._claim(row, slot, trigger)
                if claimed is None or claimed.status != "running":
                    return None if claimed is None else claimed.run_id
                if trigger == "slot":
                    self.lateness_secs.append(self.wall() - slot.timestamp())
                self.active[row.id] = claimed.run_id
                await self._run(claimed)
                return claimed.run_id
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.runtime.leases.release(key))
        finally:
            self.active.pop(row.id, None)

    async def run_now(self, schedule_id: str) -> str:
        """Run the schedule once now, besides its slots (run-now); the run's id once it is
        recorded, the run going on in the background. ConflictError while a run of it is
        under way (here or in another process)."""
        db = self.runtime.db
        row = await run_blocking(service.get_schedule, db, schedule_id)
        key = schedule_key(row.id)
        busy = ConflictError(f"a run of schedule {row.id} is under way; try again when it ends")
        if row.id in self.active:
            raise busy
        self.active[row.id] = CLAIMING
        try:
            if not await self.runtime.leases.acquire(key):
                raise busy
            try:
                claimed = await self._claim(row, datetime.now(UTC), "manual")
                if claimed is None:
                    raise NotFoundError(f"no schedule {row.id}")
            except BaseException:
                await self.runtime.leases.release(key)
                raise
        except BaseException:
            self.active.pop(row.id, None)
            raise
        if claimed.status != "running":  # recorded as skipped (a spent budget)
            self.active.pop(row.id, None)
            await self.runtime.leases.release(key)
            return claimed.run_id
        self.active[row.id] = claimed.run_id
        self._spawn(self._manual(claimed, key))
        return claimed.run_id

    async def _manual(self, claimed: Claimed, key: str) -> None:
        try:
            await self._run(claimed)
        finally:
            self.active.pop(claimed.schedule.id, None)
            with contextlib.suppress(Exception):
                await asyncio.shield(self.runtime.leases.release(key))

    async def _claim(self, row: ScheduleRow, slot: datetime, trigger: str) -> Claimed | None:
        """Holding the schedule's lease: abandon its dead runs, check the budgets and the
        catch-up policy, and claim the slot (running, or skipped with the reason)."""
        runtime = self.runtime
        owner = runtime.leases.owner
        status, detail = "running", None
        if trigger == "late" and row.catch_up == "skip":
            status, detail = "skipped", "missed while no process ran it (catchUp: skip)"
        else:
            refusal = await self._budget_refusal(row.agent_id)
            if refusal is not None:
                status, detail = "skipped", refusal

        def write() -> str | None:
            now = datetime.now(UTC)
            with runtime.db.write() as conn:
                dead = [
                    r.id for r in repo.running_runs(conn, row.id) if self.active.get(row.id) != r.id
                ]
                repo.abandon_runs(conn, dead, now, _ABANDONED)
                return repo.claim_slot(
                    conn,
                    row.id,
                    slot,
                    trigger=trigger,
                    process=owner,
                    now=now,
                    status=status,
                    detail=detail,
                )

        async with self._lock(row.id):
            run_id = await run_blocking(write)
        if run_id is None:
            return None
        self.claims += 1
        if status != "running":
            log.info("schedule %s: slot %s %s: %s", row.id, slot.isoformat(), status, detail)
        return Claimed(run_id, row, slot, trigger, status)

    async def _budget_refusal(self, agent_id: str) -> str | None:
        try:
            agent = await run_blocking(self.runtime.agents.get, agent_id)
        except NotFoundError:
            return "the agent was deleted"
        budgets = Budgets(self.runtime.db, self.runtime.settings)
        verdict = await run_blocking(budgets.verdict, agent)
        return verdict.refusal

    async def _record_skip(self, row: ScheduleRow, slot: datetime, trigger: str, why: str) -> None:
        owner = self.runtime.leases.owner

        def write() -> str | None:
            with self.runtime.db.write() as conn:
                return repo.claim_slot(
                    conn,
                    row.id,
                    slot,
                    trigger=trigger,
                    process=owner,
                    now=datetime.now(UTC),
                    status="skipped",
                    detail=why,
                )

        async with self._lock(row.id):
            if await run_blocking(write) is not None:
                self.claims += 1

    async def _run(self, claimed: Claimed) -> None:
        """Carry out a claimed run and record its end (failed, with the reason, when the
        action raised or the process is stopping)."""
        try:
            end = await carry_out(self.runtime, claimed.schedule)
        except asyncio.CancelledError:
            end = RunEnd("failed", datetime.now(UTC), detail="the process stopped during the run")
            await asyncio.shield(self._finish(claimed.run_id, end))
            raise
        except Exception as exc:
            log.exception("schedule %s: the run failed", claimed.schedule.id)
            end = RunEnd("failed", datetime.now(UTC), detail=f"{type(exc).__name__}: {exc}")
        await self._finish(claimed.run_id, end)

    async def _finish(self, run_id: str, end: RunEnd) -> None:
        def write() -> None:
            with self.runtime.db.write() as conn:
                repo.finish_run(conn, run_id, end)

        await run_blocking(write)

    # ------------------------------------------------------------ runs of dead processes
    async def sweep(self) -> int:
        """Record as abandoned the runs recorded as running whose process is gone (their
        schedule's lease nobody holds); how many."""
        db = self.runtime.db

        def running() -> list[tuple[str, str]]:
            with db.read() as conn:
                return [(r.id, r.schedule_id) for r in repo.running_runs(conn)]

        found = [
            (run_id, sid)
            for run_id, sid in await run_blocking(running)
            if self.active.get(sid) != run_id
        ]
        if not found:
            return 0
        live = await run_blocking(
            self.runtime.leases.store.live, {schedule_key(sid) for _, sid in found}
        )
        count = 0
        for run_id, schedule_id in found:
            key = schedule_key(schedule_id)
            if key in live or schedule_id in self.active:
                continue
            if not await self.runtime.leases.acquire(key):
                continue
            try:

                def write(run_id: str = run_id) -> int:
                    with db.write() as conn:
                        return repo.abandon_runs(conn, [run_id], datetime.now(UTC), _ABANDONED)

                count += await run_blocking(write)
            finally:
                await self.runtime.leases.release(key)
        return count

    # ------------------------------------------------------------ figures
    def lateness(self) -> dict[str, float]:
        """How late on-time runs started after their slot (seconds): p50, p99, max."""
        values = sorted(self.lateness_secs)
        if not values:
            return {"count": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}

        def at(q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))]

        return {"count": len(values), "p50": at(0.5), "p99": at(0.99), "max": values[-1]}


_ABANDONED = "abandoned: the process running it stopped before it ended (killed or crashed)"


def start_schedules(runtime: Runtime) -> ScheduleScheduler | None:
    """A started schedule scheduler, or None when `[schedules] enabled` is false."""
    if not runtime.settings.schedules.enabled:
        return None
    scheduler = ScheduleScheduler(runtime)
    scheduler.start()
    return scheduler
