"""The one import path for plugin authors.

A plugin is a module named under the `opencrab` entry-point group of its package; it
implements hooks (`register_providers`, `register_actions`, `register_tool_sources`,
`register_gateways`, …) with `hookimpl` and builds on the classes re-exported here, so it
never depends on where they live inside opencrab. What is exported here is kept stable
across releases.

Example:
    # pyproject.toml of the plugin
    [project.entry-points.opencrab]
    hello = "opencrab_hello"

    # opencrab_hello.py
    from opencrab.ext import Action, ActionContext, ActionResult, hookimpl

    class Hello(Action):
        name = "hello"
        description = "Say hello."
        parameters = {"type": "object", "properties": {}}

        async def execute(self, args: dict, ctx: ActionContext) -> ActionResult:
            return ActionResult.ok({"greeting": "hello"})

    @hookimpl
    def register_actions(register):
        register(Hello())

    # tools that come and go while the server runs: a ToolSource, here with namespace
    # "greeter", whose tools the model sees as greeter__hello
    class Greeter(ToolSource):
        async def start(self) -> None:
            await self.offer([Hello()])

        async def stop(self) -> None:
            await self.offer([])

    @hookimpl
    def register_tool_sources(register, settings):
        register(Greeter("greeter"))
"""

from __future__ import annotations

from opencrab.actions.base import Action, ActionContext, ActionResult, ToolSource
from opencrab.gateway.base import Gateway, GatewayConfig
from opencrab.gateway.serve import ChatGateway
from opencrab.llm.base import LlmProvider
from opencrab.messages import IncomingMessage, OutgoingMessage
from opencrab.plugins import hookimpl

__all__ = [
    "Action",
    "ActionContext",
    "ActionResult",
    "ChatGateway",
    "Gateway",
    "GatewayConfig",
    "IncomingMessage",
    "LlmProvider",
    "OutgoingMessage",
    "ToolSource",
    "hookimpl",
]
