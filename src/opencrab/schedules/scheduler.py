"""The schedule scheduler (docs/architecture.md, "Leases"): every slot of every schedule
runs once across the processes sharing the database.

`opencrab up` and `opencrab worker` each run one (`[schedules] enabled`). It keeps every
schedule that is not paused in a heap by its next slot and sleeps until the earliest: a
run starts at its slot, not at the next poll. Whether the schedules changed (created,
paused, resumed, deleted by any process) is one indexed read every `[schedules]
refresh_secs`; only then are they read again. A slot that comes due is

1. claimed, by every process that sees it due, in one transaction each
   (store/repositories/schedules.claim_slot: the schedule's last slot moves forward only
   from an earlier one, and a run row is unique per slot): one process records it, the
   others find it taken. The claimer first takes the run's lease
   (`schedule-run:<run id>`, store/leases.py), held until the run's end is recorded;
   so a run recorded as `running` whose lease nobody holds died with its process, and
   the claim records it as `abandoned`. A slot that comes while a run of the schedule
   still goes on (its lease held, in any process) is recorded as skipped, as is one
   the agent's or the fleet's budget refuses;
2. run: the action (schedules/runs.py's `carry_out`) — a turn, a ticket, a post to a
   gateway channel — and its end recorded (status, cost, the session or ticket it made);
   A `post` slot whose gateway does not run in this process is claimed here only
   `post_elsewhere_secs` after it came due, so a process running that gateway (the
   server, say, not a worker) records it first;
3. a slot found due more than `[schedules] late_grace_secs` after its time (no process
   ran, or this one was busy) follows the schedule's `catchUp`: `once` runs it now (one
   run for the latest missed slot, whatever the number missed), `skip` records it as
   skipped; the earlier missed slots are never run. Slots found due within the grace
   are claimed one by one, in order.

No process waits on another to claim a slot: if one is busy or stopped, the others
record the slot on time.
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
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from opencrab.config.models import SchedulesSection
from opencrab.core.budgets import Budgets
from opencrab.core.runtime import Runtime
from opencrab.errors import ConflictError, NotFoundError
from opencrab.offload import run_blocking
from opencrab.schedules import service
from opencrab.schedules.runs import carry_out
from opencrab.schedules.spec import latest_slot, next_slot
from opencrab.store.leases import schedule_run_key
from opencrab.store.repositories import schedules as repo
from opencrab.store.repositories.schedules import RunEnd, ScheduleRow

log = logging.getLogger(__name__)

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
        self.active: dict[str, str] = {}  # run id -> schedule id: the runs going on here
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
            self._push(schedule_id, self._first_due(row, at))

    def _first_due(self, row: ScheduleRow, at: datetime) -> datetime | None:
        """The slot to wait for first: the earliest one not claimed yet within the grace
        (a process that starts or learns of the schedule late still records each one),
        else the latest one missed before it (the catch-up policy decides), else the next
        one to come."""
        done = max((t for t in (row.last_slot, row.resumed_at) if t is not None), default=None)
        missed = latest_slot(row, at)
        if missed is None or (done is not None and missed <= done):
            return next_slot(row, at)
        grace_start = at - timedelta(seconds=self.section.late_grace_secs)
        first = next_slot(row, grace_start if done is None else max(done, grace_start))
        if first is not None and first <= at:
            return first  # claimed on time, then the ones after it in order
        return missed  # older than the grace: claimed as late

    def _push(self, schedule_id: str, slot: datetime | None) -> None:
        if slot is None:  # a one-shot schedule past its time
            self._entry.pop(schedule_id, None)
            return
        entry = next(self._seq)
        self._entry[schedule_id] = entry
        heapq.heappush(self._heap, (slot.timestamp(), entry, schedule_id, slot))

    def _push_next(self, row: ScheduleRow, after: datetime) -> None:
        self._push(row.id, next_slot(row, after))

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
        """Claim `slot` of the schedule and run it; the run's id (None: the slot was
        claimed already, here or in another process). A `post` whose gateway does not
        run here waits `post_elsewhere_secs` first: a process that runs it claims first."""
        if not self._posts_here(row):
            await asyncio.sleep(self.section.post_elsewhere_secs)
        claimed = await self._claim(row, slot, trigger)
        if claimed is None or claimed.status != "running":
            return None if claimed is None else claimed.run_id
        if trigger == "slot":
            self.lateness_secs.append(self.wall() - slot.timestamp())
        await self._run(claimed)
        return claimed.run_id

    def _posts_here(self, row: ScheduleRow) -> bool:
        """False for a `post` schedule whose gateway this process does not run."""
        if row.action.get("kind") != "post":
            return True
        home = row.action.get("home") or {}
        return home.get("gateway") in self.runtime.outlets

    async def run_now(self, schedule_id: str) -> str:
        """Run the schedule once now, besides its slots (run-now); the run's id once it is
        recorded, the run going on in the background. ConflictError while a run of it is
        under way (here or in another process)."""
        db = self.runtime.db
        row = await run_blocking(service.get_schedule, db, schedule_id)
        claimed = await self._claim(row, datetime.now(UTC), "manual")
        if claimed is None:
            raise NotFoundError(f"no schedule {row.id}")
        if claimed.status == "busy":
            raise ConflictError(f"a run of schedule {row.id} is under way; try again when it ends")
        if claimed.status == "running":
            self._spawn(self._run(claimed))
        return claimed.run_id

    async def _claim(self, row: ScheduleRow, slot: datetime, trigger: str) -> Claimed | None:
        """Claim the slot: the run's lease first (`schedule-run:<id>`, held until its end
        is recorded), then one transaction that records the schedule's runs whose lease
        nobody holds as abandoned and the slot as running — or as skipped, with the
        reason: a run of the schedule still going, the catch-up policy, a spent budget.
        None when the slot was claimed already (or the schedule is paused or gone); a
        manual run while another goes on is not recorded (status `busy`)."""
        runtime = self.runtime
        owner = runtime.leases.owner
        status, detail = "running", None
        if trigger == "late" and row.catch_up == "skip":
            status, detail = "skipped", "missed while no process ran it (catchUp: skip)"
        else:
            refusal = await self._budget_refusal(row.agent_id)
            if refusal is not None:
                status, detail = "skipped", refusal
        run_id = str(uuid4())
        key = schedule_run_key(run_id)
        if status == "running":
            await runtime.leases.acquire(key)  # a new key: always free

        def write() -> tuple[str | None, str]:
            with runtime.db.read() as conn:
                running = repo.running_runs(conn, row.id)
            live = runtime.leases.store.live(schedule_run_key(r.id) for r in running)
            going = [r for r in running if schedule_run_key(r.id) in live]
            dead = [r.id for r in running if schedule_run_key(r.id) not in live]
            final, why = status, detail
            if going and final == "running":
                if trigger == "manual":
                    return None, "busy"
                final, why = "skipped", "the previous run was still going"
            now = datetime.now(UTC)
            with runtime.db.write() as conn:
                claimed = repo.claim_slot(
                    conn,
                    row.id,
                    slot,
                    trigger=trigger,
                    process=owner,
                    now=now,
                    status=final,
                    detail=why,
                    run_id=run_id,
                )
                if claimed is not None:
                    repo.abandon_runs(conn, dead, now, _ABANDONED)
            return claimed, final

        try:
            async with self._lock(row.id):
                found, final = await run_blocking(write)
        except BaseException:
            await _let_go(runtime, key)
            raise
        if found is None or final != "running":
            await _let_go(runtime, key)
        if final == "busy":
            return Claimed(run_id, row, slot, trigger, "busy")
        if found is None:
            return None
        self.claims += 1
        if final != "running":
            log.info("schedule %s: slot %s %s", row.id, slot.isoformat(), final)
        return Claimed(found, row, slot, trigger, final)

    async def _budget_refusal(self, agent_id: str) -> str | None:
        try:
            agent = await run_blocking(self.runtime.agents.get, agent_id)
        except NotFoundError:
            return "the agent was deleted"
        budgets = Budgets(self.runtime.db, self.runtime.settings)
        verdict = await run_blocking(budgets.verdict, agent)
        return verdict.refusal

    async def _run(self, claimed: Claimed) -> None:
        """Carry out a claimed run, record its end (failed, with the reason, when the
        action raised or the process is stopping), then let go of its lease."""
        self.active[claimed.run_id] = claimed.schedule.id
        try:
            try:
                end = await carry_out(self.runtime, claimed.schedule)
            except asyncio.CancelledError:
                end = RunEnd("failed", datetime.now(UTC), detail=_STOPPED)
                await asyncio.shield(self._finish(claimed.run_id, end))
                raise
            except Exception as exc:
                log.exception("schedule %s: the run failed", claimed.schedule.id)
                end = RunEnd("failed", datetime.now(UTC), detail=f"{type(exc).__name__}: {exc}")
            await self._finish(claimed.run_id, end)
        finally:
            self.active.pop(claimed.run_id, None)
            await _let_go(self.runtime, schedule_run_key(claimed.run_id))

    async def _finish(self, run_id: str, end: RunEnd) -> None:
        def write() -> None:
            with self.runtime.db.write() as conn:
                repo.finish_run(conn, run_id, end)

        await run_blocking(write)

    # ------------------------------------------------------------ runs of dead processes
    async def sweep(self) -> int:
        """Record as abandoned the runs recorded as running whose lease nobody holds (their
        process died mid-run); how many."""
        db = self.runtime.db

        def abandon() -> int:
            with db.read() as conn:
                running = [r.id for r in repo.running_runs(conn) if r.id not in self.active]
            if not running:
                return 0
            live = self.runtime.leases.store.live(schedule_run_key(r) for r in running)
            dead = [r for r in running if schedule_run_key(r) not in live]
            if not dead:
                return 0
            with db.write() as conn:
                return repo.abandon_runs(conn, dead, datetime.now(UTC), _ABANDONED)

        return await run_blocking(abandon)

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
_STOPPED = "the process stopped during the run"


async def _let_go(runtime: Runtime, key: str) -> None:
    with contextlib.suppress(Exception):
        await asyncio.shield(runtime.leases.release(key))


def start_schedules(runtime: Runtime) -> ScheduleScheduler | None:
    """A started schedule scheduler, or None when `[schedules] enabled` is false."""
    if not runtime.settings.schedules.enabled:
        return None
    scheduler = ScheduleScheduler(runtime)
    scheduler.start()
    return scheduler
