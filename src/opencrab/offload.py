"""Blocking work (files, the database) run off the event loop, safe to cancel.

Example:
    written = await run_blocking(workspace.write, "notes/today.md", text)
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def run_blocking(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `fn` in a worker thread and return its result, leaving the event loop free.

    A thread cannot be stopped once it runs, so when the caller is cancelled meanwhile
    the cancellation is passed on only after `fn` has returned: the caller never goes on
    (recording an interrupted turn, say) while its file or database work is half done.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    future = loop.run_in_executor(None, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.wait([future])
            except asyncio.CancelledError:
                continue  # still wait for the thread: it cannot be stopped
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller gets
        raise
