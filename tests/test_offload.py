"""run_blocking: work in a worker thread, and a cancelled caller waits for it to end."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time

import pytest

from opencrab import offload
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


async def test_blocking_work_runs_side_by_side() -> None:
    """Several callers at once each get a thread (a slow file write holds up no other)."""
    arrived = threading.Barrier(3, timeout=30)

    def job(n: int) -> int:
        arrived.wait()  # all three wait here together: three threads at once
        return n

    assert await asyncio.gather(*(run_blocking(job, n) for n in range(3))) == [0, 1, 2]


async def test_stop_iteration_reaches_the_caller_as_an_error() -> None:
    def job() -> None:
        raise StopIteration("done")

    with pytest.raises(RuntimeError, match="StopIteration"):
        await run_blocking(job)


async def test_inline_runs_the_work_on_the_callers_thread() -> None:
    with offload.inline():
        assert await run_blocking(threading.get_ident) == threading.get_ident()
    assert await run_blocking(threading.get_ident) != threading.get_ident()


async def test_threads_are_reused_and_capped() -> None:
    for _ in range(50):
        await run_blocking(lambda: None)
    names = {t.name for t in threading.enumerate() if t.name.startswith("opencrab-offload")}
    assert 1 <= len(names) <= offload.MAX_WORKERS


def test_a_forked_child_starts_workers_of_its_own() -> None:
    asyncio.run(run_blocking(lambda: None))  # the parent has a worker now
    deadline = time.monotonic() + 30
    while not offload._idle and time.monotonic() < deadline:  # and it waits for work
        time.sleep(0.001)
    pid = os.fork()
    if pid == 0:  # the child: run_blocking still works (exit status 0), within 30 s
        signal.alarm(30)
        ok = asyncio.run(run_blocking(lambda: 42)) == 42
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
