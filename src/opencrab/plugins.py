"""Plugin hooks (pluggy). Built-ins register through the same hooks as third parties.

A third-party package exposes a module with hook implementations under the
`opencrab` entry-point group:

    # pyproject.toml of the plugin
    [project.entry-points.opencrab]
    hello = "opencrab_hello"

    # opencrab_hello.py
    import typer
    from opencrab.plugins import hookimpl

    @hookimpl
    def register_commands(app: typer.Typer) -> None:
        @app.command()
        def hello() -> None:
            print("hello from a plugin")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import typer
    from fastapi import FastAPI

hookspec = pluggy.HookspecMarker("opencrab")
hookimpl = pluggy.HookimplMarker("opencrab")

COMMAND_PLUGINS = (
    "opencrab.cli.up",
    "opencrab.cli.worker",
    "opencrab.cli.db",
    "opencrab.cli.tokens",
    "opencrab.cli.imports",
    "opencrab.cli.events",
    "opencrab.cli.llm",
    "opencrab.cli.config",
    "opencrab.cli.agents",
    "opencrab.cli.schedules",
    "opencrab.cli.agent_mode",
    "opencrab.cli.mcp",
    "opencrab.cli.a2a_remotes",
)
"""opencrab's own CLI commands (modules that import little until a command runs)."""

DEFAULT_PLUGINS = (
    "opencrab.llm.providers",
    *COMMAND_PLUGINS,
    "opencrab.actions.speech",
    "opencrab.actions.workspace",
    "opencrab.actions.learning",
    "opencrab.actions.llm",
    "opencrab.actions.files",
    "opencrab.actions.command",
    "opencrab.actions.web",
    "opencrab.actions.web_search",
    "opencrab.tickets.actions",
    "opencrab.schedules.actions",
    "opencrab.core.skills",
    "opencrab.tickets.approvals",
    "opencrab.gateway.builtins",
    "opencrab.mcp.client",
    "opencrab.a2a.client",
)
"""Modules of opencrab itself that implement hooks, loaded before entry-point plugins."""

SERVER_PLUGINS = (
    "opencrab.server.api.health",
    "opencrab.server.api.agents",
    "opencrab.server.api.preview",
    "opencrab.server.api.overview",
    "opencrab.server.api.sessions",
    "opencrab.server.api.session_events",
    "opencrab.server.api.discussions",
    "opencrab.server.api.tickets",
    "opencrab.server.api.schedules",
    "opencrab.server.api.approvals",
    "opencrab.server.api.inbox",
    "opencrab.server.api.openai_compat",
    "opencrab.server.api.tools",
    "opencrab.server.api.tool_settings",
    "opencrab.server.api.agent_tools",
    "opencrab.server.api.traces",
    "opencrab.server.api.skills",
    "opencrab.server.api.memory",
    "opencrab.server.api.memory_export",
    "opencrab.server.api.workspace",
    "opencrab.server.api.llm",
    "opencrab.server.api.analytics",
    "opencrab.server.api.imports",
    "opencrab.server.api.ws",
    "opencrab.server.api.budgets",
    "opencrab.server.api.agent_mode",
    "opencrab.server.api.llm_analytics",
    "opencrab.server.api.llm_export",
    "opencrab.server.api.llm_settings",
    "opencrab.server.api.mcp",
    "opencrab.gateway.line",  # POST /hooks/line, LINE's webhook
    "opencrab.gateway.telegram_webhook",  # POST /hooks/telegram (no Telegram SDK import)
    "opencrab.server.api.gateways",
    "opencrab.gateway.slack",  # the Events API's /hooks/slack/… (signature-checked)
    "opencrab.dashboard.routes",  # after the API: its error pages cover the rest
)
"""opencrab's HTTP routes: loaded (with FastAPI) only when an app is built."""


class Hooks:
    """The hook specifications."""

    @hookspec
    def register_commands(self, app: typer.Typer) -> None:
        """Add commands or command groups to the `opencrab` CLI."""

    @hookspec
    def register_routes(self, app: FastAPI) -> None:
        """Add routers to the server app (include_router)."""

    @hookspec
    def register_providers(self, register: Callable[[Any], None]) -> None:
        """Add LLM providers: `register(ProviderClass)`, an `opencrab.ext.LlmProvider`
        subclass declaring its `name` and `facts` (`opencrab.ext.ProviderFacts`); it is
        built as `ProviderClass(config, name=name)`. Example:

            @hookimpl
            def register_providers(register):
                register(EchoProvider)
        """

    @hookspec
    def register_actions(self, register: Callable[[Any], None]) -> None:
        """Add agent actions: `register(action)` with an `opencrab.actions.base.Action`."""

    @hookspec
    def register_tool_sources(self, register: Callable[[Any], None], settings: Any) -> None:
        """Add tool sources: `register(source)` with an `opencrab.actions.base.ToolSource`
        (`settings`: the process's opencrab.config.Settings, to read the source's own table).

        Every role (`opencrab up` with HTTP or without, `opencrab worker`) starts the
        sources before any turn runs and stops them in reverse order when it stops; their
        actions reach the model as `<namespace>__<tool>` where the agent is granted them.
        A source whose start fails is logged and offers nothing. Example:

            class Clock(ToolSource):
                async def start(self):
                    await self.offer([Now()])  # an Action named "now": clock__now

                async def stop(self):
                    await self.offer([])

            @hookimpl
            def register_tool_sources(register, settings):
                register(Clock("clock"))
        """

    @hookspec
    def register_gateways(self, register: Callable[[Any], None]) -> None:
        """Add gateways: `register(GatewayClass)`, an `opencrab.ext.Gateway` subclass (or
        any class with the same three facts) declaring its `name`, the model of its
        `[gateway.<name>]` table (`config_model`, an `opencrab.ext.GatewayConfig`) and
        `from_config(runtime, config, **options)`, which builds it from the checked table
        or returns None when the table leaves it off.

        The config checks each `[gateway.<name>]` table with the model of the gateway
        registered under that name (an unknown name or key is a config error). `opencrab
        up` (with HTTP or without) builds every gateway with the runtime alone and runs
        each `opencrab.ext.ChatGateway` it gets: every message is a turn of the gateway's
        agent in its conversation's session, the reply goes back; while it runs it is an
        outlet heartbeat homes and budget alerts are written to. Example:

            class SlackConfig(GatewayConfig):
                enabled: bool = False
                token: str = ""

            class SlackGateway(ChatGateway):
                name = "slack"
                config_model = SlackConfig
                ...

            @hookimpl
            def register_gateways(register):
                register(SlackGateway)
        """

    @hookspec
    def register_approval_hooks(self, register: Callable[[Any], None]) -> None:
        """Add approval hooks: `register(hook)` with an `opencrab.core.approvals.ApprovalHook`
        (told in the writing transaction when a tool call is held for a person and when
        it is decided; the tickets layer suspends and resumes tickets this way)."""

    @hookspec
    def register_skill_dirs(self) -> list[Any]:
        """Directories (pathlib.Path) holding standard `*.skill.md` files."""
        raise NotImplementedError  # a specification: pluggy calls the implementations


@cache
def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager: built-ins first, then installed plugins."""
    return _manager(DEFAULT_PLUGINS)


def command_plugin_manager() -> pluggy.PluginManager:
    """The plugin manager that builds the CLI.

    The process-wide one when it exists already; otherwise one with only the command
    modules and the installed plugins, so `opencrab --help` imports none of what the
    commands use (providers, actions, the store). Other hooks go to `plugin_manager()`.
    """
    if plugin_manager.cache_info().currsize:
        return plugin_manager()
    return _command_manager()


@cache
def _command_manager() -> pluggy.PluginManager:
    return _manager(COMMAND_PLUGINS)


def _manager(builtins: tuple[str, ...]) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("opencrab")
    pm.add_hookspecs(Hooks)
    for name in builtins:
        pm.register(importlib.import_module(name), name=name)
    pm.load_setuptools_entrypoints("opencrab")
    return pm


def server_plugin_manager() -> pluggy.PluginManager:
    """The plugin manager with opencrab's route modules registered as well."""
    pm = plugin_manager()
    for name in SERVER_PLUGINS:
        if pm.get_plugin(name) is None:
            pm.register(importlib.import_module(name), name=name)
    return pm
