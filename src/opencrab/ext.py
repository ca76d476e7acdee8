"""The one import path for plugin authors.

A plugin is a module named under the `opencrab` entry-point group of its package; it
implements hooks (`register_providers`, `register_actions`, `register_gateways`, …) with
`hookimpl` and builds on the classes re-exported here, so it never depends on where they
live inside opencrab. What is exported here is kept stable across releases.

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

A gateway is a `ChatGateway` declaring its name and the model of its `[gateway.<name>]`
table (`config_model`, a `GatewayConfig`); its messages carry a `ChatSource` (its name and
the conversation), and a `(gateway, channel)` `Outlet` names where heartbeats and budget
alerts may write through it:

    class EchoConfig(GatewayConfig):
        enabled: bool = False
        greeting: str = "hi"

    class EchoGateway(ChatGateway):
        name = "echo"
        config_model = EchoConfig
        ...  # connect, disconnect, receive, send

    @hookimpl
    def register_gateways(register):
        register(EchoGateway)
"""

from __future__ import annotations

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.gateway.base import Gateway, GatewayConfig
from opencrab.gateway.serve import ChatGateway
from opencrab.llm.base import LlmProvider
from opencrab.messages import (
    ChatSource,
    IncomingMessage,
    MessageContent,
    MessageOutlet,
    MessageTarget,
    OutgoingMessage,
    Outlet,
    Sender,
)
from opencrab.plugins import hookimpl

__all__ = [
    "Action",
    "ActionContext",
    "ActionResult",
    "ChatGateway",
    "ChatSource",
    "Gateway",
    "GatewayConfig",
    "IncomingMessage",
    "LlmProvider",
    "MessageContent",
    "MessageOutlet",
    "MessageTarget",
    "OutgoingMessage",
    "Outlet",
    "Sender",
    "hookimpl",
]
