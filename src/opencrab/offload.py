"""Blocking work (files, the database) run off the event loop, safe to cancel.

The work runs on worker threads of this module's own (as many at most as asyncio's
default executor would start: min(32, CPUs + 4), started when all are busy). Handing work
to them is a queue put and, when it is done, one `call_soon_threadsafe`: about half the
CPU of `loop.run_in_executor` (whose ThreadPoolExecutor takes a Python-level semaphore
and a condition variable per call), which an agent turn pays on each of its steps.
`inline()` runs the work on the caller's thread instead (bench/turn_profile.py profiles a
turn in one thread that way).

Example:
    written = await run_blocking(workspace.write, "notes/today.md", text)
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
"""Worker threads at most (asyncio's default executor's number)."""

_jobs: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]]]
_jobs = queue.SimpleQueue()
_lock = threading.Lock()
_workers: list[threading.Thread] = []
_idle = 0  # workers waiting for a job no caller has counted on yet (under _lock)
_inline = False


async def run_blocking(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `fn` in a worker thread and return its result, leaving the event loop free.

    A thread cannot be stopped once it runs, so when the caller is cancelled meanwhile
    the cancellation is passed on only after `fn` has returned: the caller never goes on
    (recording an interrupted turn, say) while its file or database work is half done.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    if _inline:
        return call()
    future: _Work[T] = _Work(loop=loop)
    _submit(loop, future, call)
    try:
        return await future
    except asyncio.CancelledError:
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller gets
        raise


class _Work(asyncio.Future[T]):
    """The future of offloaded work: it refuses to be cancelled (the thread cannot be
    stopped), so a caller's task cancelled while it waits is told once the work has
    ended (asyncio.Task delivers a cancellation its awaited future refused when that
    future is done). Cheaper than `asyncio.shield`, which adds a future and two
    callbacks to every hop."""

    def cancel(self, msg: Any = None) -> bool:
        return False


@contextmanager
def inline() -> Iterator[None]:
    """While in the block, `run_blocking` runs its work on the caller's thread (profiling)."""
    global _inline
    _inline = True
    try:
        yield
    finally:
        _inline = False


def _submit(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], call: Any) -> None:
    """Queue the job for an idle worker (taken from the idle count now, so the next job
    does not count on the same one), else a new worker, else (all MAX_WORKERS busy) the
    first worker to finish."""
    global _idle
    start = False
    with _lock:
        if _idle:
            _idle -= 1
        elif len(_workers) < MAX_WORKERS:
            start = True
            worker = threading.Thread(
                target=_work, name=f"opencrab-offload-{len(_workers)}", daemon=True
            )
            _workers.append(worker)
    _jobs.put((loop, future, call))
    if start:
        worker.start()


def _work() -> None:
    global _idle
    while True:
        loop, future, call = _jobs.get()
        result = None
        try:
            result = call()
        except BaseException as exc:  # handed to the awaiting caller
            _settle_soon(loop, future, None, exc)
        else:
            _settle_soon(loop, future, result, None)
        del loop, future, call, result  # hold nothing while waiting for the next job
        with _lock:
            _idle += 1


def _forget_workers() -> None:
    """In a forked child: the parent's workers are not there (new ones start on demand)."""
    global _jobs, _lock, _idle
    _jobs, _lock, _idle = queue.SimpleQueue(), threading.Lock(), 0
    _workers.clear()


os.register_at_fork(after_in_child=_forget_workers)


def _settle_soon(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    try:
        if exc is None:  # the future cannot have been cancelled (_Work)
            loop.call_soon_threadsafe(future.set_result, result)
        else:
            loop.call_soon_threadsafe(_fail, future, exc)
    except RuntimeError:  # the loop has closed: nobody awaits the result any more
        log.debug("offloaded work ended after its event loop closed")


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if isinstance(exc, StopIteration):  # a future refuses it (as run_in_executor's)
        exc = RuntimeError(f"the offloaded work raised StopIteration: {exc}")
    future.set_exception(exc)
