"""A plugin module with tool sources, written as a third party would: it imports only
from `opencrab.ext`.

A test puts the sources it wants in `SOURCES` and registers this module with the plugin
manager; `register_tool_sources` registers them in that order. A `Shelf` offers `count`
(each call is kept in `counted`) and `label`, and changes its list when told (`offer`);
every start and stop is written to the `journal` the test gives it, and `started` is set
once it offers its tools.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from opencrab.ext import Action, ActionContext, ActionResult, ToolSource, hookimpl

SOURCES: list[ToolSource] = []
"""The sources this plugin registers, in order (set by the test)."""


class Count(Action):
    name = "count"
    description = "Count the items on the shelf."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["item"],
        "properties": {"item": {"type": "string"}},
        "additionalProperties": False,
    }

    def __init__(self, shelf: Shelf) -> None:
        self.shelf = shelf

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        self.shelf.counted.append(args["item"])
        return ActionResult.ok({"item": args["item"], "count": 3})


class Label(Action):
    name = "label"
    description = "Read the shelf's label."

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok({"label": "preserves"})


class Shelf(ToolSource):
    """A source offering `count` and `label` once started."""

    def __init__(self, namespace: str, journal: list[str]) -> None:
        super().__init__(namespace)
        self.journal = journal
        self.counted: list[str] = []
        self.count = Count(self)
        self.started = asyncio.Event()

    async def start(self) -> None:
        self.journal.append(f"start {self.namespace}")
        await self.offer([self.count, Label()])
        self.started.set()

    async def stop(self) -> None:
        self.journal.append(f"stop {self.namespace}")
        await self.offer([])


class BrokenShelf(Shelf):
    """A source whose start fails after it offered its tools."""

    async def start(self) -> None:
        await super().start()
        raise ConnectionError("the shelf server refused the connection")


@hookimpl
def register_tool_sources(register: Any, settings: Any) -> None:
    for source in SOURCES:
        register(source)
