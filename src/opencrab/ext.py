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

An LLM provider declares its facts on its class and is registered the same way; see
opencrab.llm.base for the interface and the README's "Plugins" section for a whole one:

    class Echo(LlmProvider):
        name = "echo"
        facts = ProviderFacts(key_env="ECHO_API_KEY", prices=(Price("echo-1", 0.5, 1.0),))
        ...

    @hookimpl
    def register_providers(register):
        register(Echo)

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

from opencrab.actions.base import Action, ActionContext, ActionResult, ToolSource
from opencrab.config.models import ProviderConfig
from opencrab.config.providers import Price, ProviderFacts, ProviderOptions
from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderNotConfigured,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnreachable,
    RateLimited,
    StreamInterrupted,
)
from opencrab.gateway.base import Gateway, GatewayConfig
from opencrab.gateway.platform import (
    Button,
    Connection,
    PlatformConfig,
    buttons_for,
    press,
    split_text,
)
from opencrab.gateway.serve import ChatGateway
from opencrab.llm.base import LlmProvider
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    Choice,
    FinishReason,
    ImagePart,
    Message,
    ModelInfo,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
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
    "Button",
    "ChatChunk",
    "ChatGateway",
    "ChatRequest",
    "ChatResponse",
    "ChatSource",
    "Choice",
    "Connection",
    "FinishReason",
    "Gateway",
    "GatewayConfig",
    "ImagePart",
    "IncomingMessage",
    "LlmError",
    "LlmProvider",
    "MalformedResponse",
    "Message",
    "MessageContent",
    "MessageOutlet",
    "MessageTarget",
    "ModelInfo",
    "OutgoingMessage",
    "Outlet",
    "PlatformConfig",
    "Price",
    "ProviderAuthError",
    "ProviderBadRequest",
    "ProviderConfig",
    "ProviderFacts",
    "ProviderNotConfigured",
    "ProviderOptions",
    "ProviderServerError",
    "ProviderTimeout",
    "ProviderUnreachable",
    "RateLimited",
    "Sender",
    "StreamInterrupted",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolDefinition",
    "ToolSource",
    "Usage",
    "buttons_for",
    "hookimpl",
    "press",
    "split_text",
]
