"""search_code's engine: the pattern is compiled in the child, never on the event loop.

A pattern can take seconds to compile (issue 31 "Also": a 1,000-character pattern
stalled every client about a second per call). The test counts a concurrent
coroutine's ticks while such a pattern is compiled: on the event loop there would be
none until the search answered.
"""

from __future__ import annotations

import asyncio

import pytest

from opencrab.actions.base import ActionContext
from opencrab.actions.code_search import MAX_PATTERN_CHARS, search_workspace
from opencrab.errors import ValidationError

# seconds of compiling with IGNORECASE (every range folded), then refused by the
# compiler at its end: the whole call is the compile, whoever does it
SLOW_TO_COMPILE = "(?i)" + "[\u0100-\uffff]" * 180 + "(?<=a+)"


async def test_a_pattern_slow_to_compile_does_not_stall_the_event_loop(
    ctx: ActionContext,
) -> None:
    assert len(SLOW_TO_COMPILE) <= MAX_PATTERN_CHARS
    ctx.workspace.write("a.txt", "a\n")
    ctx.settings.tools.search_timeout_secs = 600  # however loaded the machine, it compiles
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = ticks
    try:
        with pytest.raises(ValidationError, match="look-behind requires fixed-width pattern"):
            await search_workspace(ctx.workspace, ctx.settings.tools, SLOW_TO_COMPILE)
    finally:
        stop.set()
        await ticking
    # the loop went on while the child compiled: thousands of ticks (none on the loop)
    assert ticks - started > 100


async def test_a_pattern_over_the_limit_is_refused_before_anything_runs(
    ctx: ActionContext,
) -> None:
    with pytest.raises(ValidationError, match=f"over the limit of {MAX_PATTERN_CHARS}"):
        await search_workspace(ctx.workspace, ctx.settings.tools, "a" * (MAX_PATTERN_CHARS + 1))
