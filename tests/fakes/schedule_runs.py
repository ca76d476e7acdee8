"""A schedule run now and waited for to its end, as the chat gateways' `post` tests do."""

from __future__ import annotations

import asyncio
import time

from opencrab.core.runtime import Runtime
from opencrab.schedules.scheduler import ScheduleScheduler
from opencrab.schedules.service import get_run
from opencrab.store.repositories.schedules import RunRow


async def run_to_its_end(runtime: Runtime, schedule_id: str, *, timeout: float = 60) -> RunRow:
    """Claim a run of `schedule_id` now (the scheduler's run-now), wait until it has ended
    and return it; fails naming the run when it has not ended within `timeout` seconds."""
    scheduler = ScheduleScheduler(runtime)
    try:
        run_id = await scheduler.run_now(schedule_id)
        deadline = time.monotonic() + timeout
        while (run := get_run(runtime.db, run_id)).ended_at is None:
            assert time.monotonic() < deadline, f"run {run_id} did not end in {timeout} s"
            await asyncio.sleep(0.05)
    finally:
        await scheduler.stop()
    return run
