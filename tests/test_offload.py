"""run_blocking: work in a worker thread, and a cancelled caller waits for it to end."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from opencrab.offload import run_blocking

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


async def test_runs_in_another_thread_with_the_callers_context() -> None:
    where.set("caller")

    def job(a: int, *, b: int) -> tuple[int, str, bool]:
        return a + b, where.get(), threading.current_thread() is threading.main_thread()

    assert await run_blocking(job, 1, b=2) == (3, "caller", False)


async def test_errors_reach_the_caller() -> None:
    def job() -> None:
        raise ValueError("disk full")

    with pytest.raises(ValueError, match="disk full"):
        await run_blocking(job)


async def test_a_cancelled_caller_goes_on_only_after_the_work_ended() -> None:
    release = threading.Event()
    finished: list[str] = []

    def job() -> None:
        release.wait()
        finished.append("written")

    task = asyncio.create_task(run_blocking(job))
    await asyncio.sleep(0)
    task.cancel()
    for _ in range(20):  # the loop runs on; the caller stays suspended meanwhile
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()  # cancelled again: still waits
    await asyncio.sleep(0)
    assert not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == ["written"]
