"""Tool sources: actions that come from something with its own lifecycle.

An MCP server, a remote A2A agent: a tool source is started before the action registry
is used and stopped when the process stops (core/tool_sources.py does both, for every
role). Its actions reach the model as `<namespace>__<tool>` (an MCP server's as
`mcp__<server>__<tool>`), and its list may change while it runs: the source announces
a change with `await self.offer(actions)`, which bumps its `version` and tells the
registry, which offers the new list from then on. Grants (agent_tools), approval
policies and permissions apply to a source's tools exactly as to the built-in actions.

A source whose `start` raises is logged and offers nothing; the server runs on.
`start` that fails must release what it took itself (`stop` is not called then).

Example:
    class Clock(ToolSource):
        async def start(self) -> None:
            await self.offer([Now()])  # an Action named "now": the model sees clock__now

        async def stop(self) -> None:
            await self.offer([])

    @hookimpl
    def register_tool_sources(register, settings):
        register(Clock("clock"))
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opencrab.actions.base import Action

log = logging.getLogger(__name__)

NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")
"""What a namespace may be: letters, digits, `_` and `-` (it prefixes every tool name)."""

SEPARATOR = "__"
"""Between a source's namespace and its tool's own name: `mcp__files__read`."""

Listener = Callable[["ToolSource"], Awaitable[None]]


class ToolSource(ABC):
    """Actions from something that starts, stops and may change its list while it runs.

    See the module docstring for an example.
    """

    def __init__(self, namespace: str) -> None:
        if not NAMESPACE.fullmatch(namespace):
            raise ValueError(
                f"tool source namespace {namespace!r}: use 1 to 48 letters, digits, "
                "'_' or '-', starting with a letter or digit"
            )
        self.namespace = namespace
        self.version = 0  # bumped by every `offer`
        self._actions: tuple[Action, ...] = ()
        self._listeners: list[Listener] = []

    @abstractmethod
    async def start(self) -> None:
        """Connect or launch, then `await self.offer(actions)` with the first list."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect and release what `start` took."""

    def actions(self) -> tuple[Action, ...]:
        """What the source offers now, by each action's own name (without the namespace)."""
        return self._actions

    def full_name(self, name: str) -> str:
        """The name the model sees for this source's action `name`."""
        return f"{self.namespace}{SEPARATOR}{name}"

    def owns(self, full_name: str) -> bool:
        """Whether `full_name` is in this source's namespace (offered now or not)."""
        return full_name.startswith(self.namespace + SEPARATOR)

    async def offer(self, actions: Iterable[Action]) -> None:
        """Replace what the source offers and tell every listener (the registry, the
        `tools` table); a listener that fails is logged, the others are still told."""
        self._actions = tuple(actions)
        self.version += 1
        for listener in list(self._listeners):
            try:
                await listener(self)
            except Exception:
                log.exception("tool source %s: a listener of its change failed", self.namespace)

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(source)` after every `offer`."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling `listener`."""
        if listener in self._listeners:
            self._listeners.remove(listener)
