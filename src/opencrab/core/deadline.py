"""A turn's overall deadline (`[agent] turn_timeout_secs`): model calls are cut off when
it passes and none starts after it; the turn then ends with TurnTimeout.

Example:
    deadline = TurnDeadline(300.0)
    deadline.start()                       # on the running event loop
    reply = await deadline.bound(router.chat(request, info))
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from opencrab.errors import TurnTimeout

T = TypeVar("T")


class TurnDeadline:
    """When a turn must end, on the event loop's clock."""

    def __init__(self, secs: float) -> None:
        self.secs = secs
        self.at = 0.0  # set by start()

    def start(self) -> None:
        """The turn begins now: it must end `secs` from here."""
        self.at = asyncio.get_running_loop().time() + self.secs

    def check(self) -> None:
        """TurnTimeout once the deadline has passed (before starting another call)."""
        if asyncio.get_running_loop().time() >= self.at:
            raise self.late()

    async def bound(self, pending: Awaitable[T]) -> T:
        """`pending`'s result, or TurnTimeout when the deadline passes first."""
        scope = asyncio.timeout_at(self.at)
        try:
            async with scope:
                return await pending
        except TimeoutError:
            if not scope.expired():
                raise  # a TimeoutError of the call's own, not the deadline
            raise self.late() from None

    def late(self) -> TurnTimeout:
        """The error that ends a turn past its deadline."""
        return TurnTimeout(
            f"the turn ran past its deadline of {self.secs:g} s "
            "([agent] turn_timeout_secs) and was ended"
        )
