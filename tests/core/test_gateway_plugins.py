"""Gateways register through the `register_gateways` plugin hook, the built-ins too, and a
server (`opencrab up`, with HTTP or without) runs every registered, enabled chat gateway."""

from __future__ import annotations

import asyncio
import io
import signal
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from opencrab.cli.up import serve_without_http
from opencrab.config import Settings
from opencrab.config.gateways import registered_gateways
from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.errors import ConfigError, NotFoundError
from opencrab.gateway.builtins import Cli, Discord, OpenAiCompat, Rest
from opencrab.gateway.cli import CliGateway
from opencrab.gateway.configs import CliConfig, DiscordConfig
from opencrab.gateway.discord import DiscordGateway
from opencrab.gateway.registry import build_gateway
from opencrab.gateway.serve import start_chat_gateways, stop_chat_gateways
from opencrab.messages import session_for
from opencrab.plugins import DEFAULT_PLUGINS, plugin_manager
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes.chat_gateway import MemoryChat, MemoryChatPlugin
from tests.fakes.scripted_provider import ScriptedProvider

BUILTINS = "opencrab.gateway.builtins"


@pytest.fixture
def plugins() -> Iterator[list[str]]:
    """Register plugin objects for one test: append (name, plugin) via `use`."""
    names: list[str] = []
    yield names
    for name in names:
        plugin_manager().unregister(name=name)


def use(names: list[str], name: str, plugin: object) -> None:
    plugin_manager().register(plugin, name=name)
    names.append(name)


def test_the_builtin_gateways_are_a_plugin() -> None:
    assert BUILTINS in DEFAULT_PLUGINS
    registered = registered_gateways()
    assert registered["rest"] is Rest
    assert registered["discord"] is Discord
    assert registered["cli"] is Cli
    assert registered["openai_compat"] is OpenAiCompat
    assert all(registered[name].__module__ == BUILTINS for name in ("rest", "discord", "cli"))


async def test_a_plugin_gateway_is_started_answered_and_stopped(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, plugins: list[str]
) -> None:
    chat = MemoryChat()
    plugin = MemoryChatPlugin(memchat=chat, quiet=None)  # `quiet` is off: not started
    use(plugins, "memchat-test", plugin)
    scripted.outcomes.clear()
    scripted.then(speak("Water them on Fridays."))

    started = await start_chat_gateways(runtime)
    assert [gateway for gateway, _ in started] == [chat]
    assert {name for name, _, _ in plugin.calls} == {"memchat", "quiet"}
    assert all(rt is runtime and options == {} for _, rt, options in plugin.calls)
    assert runtime.outlets["memchat"] is chat  # the heartbeat can speak there
    chat.post("When do I water the tomatoes?")
    replied = asyncio.ensure_future(chat.replied.wait())
    await asyncio.wait({replied, started[0][1]}, return_when=asyncio.FIRST_COMPLETED)
    assert replied.done()
    assert chat.sent[0].content.text == "Water them on Fridays."
    assert chat.sent[0].target.channel_id == "C1"
    session = session_for("memchat", "W1/C1", agent.id)
    assert [m.content for m in session_messages(runtime.db, session, limit=10)] == [
        "When do I water the tomatoes?",
        "Water them on Fridays.",
    ]
    await stop_chat_gateways(started)
    assert chat.disconnected


async def test_without_the_builtins_plugin_discord_is_not_started(
    runtime: Runtime, agent: Agent
) -> None:
    """serve.py names no gateway: an enabled Discord starts only through its registration."""
    runtime.settings.gateway.discord = DiscordConfig(
        enabled=True, token=SecretStr("${DISCORD_TOKEN}"), guild_ids=[1]
    )
    with pytest.raises(ConfigError, match="token is not set"):
        await start_chat_gateways(runtime)  # the built-in tried to log in
    builtins = plugin_manager().unregister(name=BUILTINS)
    try:
        assert await start_chat_gateways(runtime) == []
    finally:
        plugin_manager().register(builtins, name=BUILTINS)


async def test_a_gateway_that_cannot_start_stops_the_ones_before_it(
    runtime: Runtime, agent: Agent, plugins: list[str]
) -> None:
    first = MemoryChat()
    terminal = CliGateway(session_id="s1", stdin=io.StringIO(), stdout=io.StringIO())
    use(plugins, "memchat-test", MemoryChatPlugin(memchat=first, terminal=terminal))
    with pytest.raises(ConfigError, match="'terminal' is not a ChatGateway"):
        await start_chat_gateways(runtime)
    assert first.connected.is_set()
    assert first.disconnected


async def test_the_answering_agent_is_the_gateways_configured_one(
    runtime: Runtime, agent: Agent, plugins: list[str]
) -> None:
    use(plugins, "memchat-test", MemoryChatPlugin(memchat=MemoryChat(agent="nobody")))
    with pytest.raises(NotFoundError, match="nobody"):
        await start_chat_gateways(runtime)


async def test_the_builtin_factories_follow_the_config(runtime: Runtime, agent: Agent) -> None:
    assert build_gateway("discord", runtime) is None  # off by default
    assert build_gateway("cli", runtime) is None  # a server has no terminal
    terminal = build_gateway("cli", runtime, session_id="s1")
    assert isinstance(terminal, CliGateway)
    assert terminal.session_id == "s1"
    runtime.settings.gateway.cli = CliConfig(enabled=False)
    assert build_gateway("cli", runtime, session_id="s1") is None
    runtime.settings.gateway.discord = DiscordConfig(
        enabled=True, token=SecretStr("t"), guild_ids=[1], agent="aki"
    )
    discord = build_gateway("discord", runtime)
    assert isinstance(discord, DiscordGateway)
    assert discord.agent() == "aki"
    assert build_gateway("slack", runtime) is None  # registered (issue 38), off by default
    with pytest.raises(ConfigError, match="no gateway named 'pigeon'"):
        build_gateway("pigeon", runtime)


async def test_the_server_without_http_runs_the_registered_gateways(
    settings: Settings, db: Database, plugins: list[str]
) -> None:
    """`opencrab up` with `[gateway.rest] enabled = false` starts the plugin's gateway."""
    from opencrab.core.agent import AgentCreate, AgentStore

    AgentStore(db, settings).create(AgentCreate(name="aki", prompt="p"))
    chat = MemoryChat()
    use(plugins, "memchat-test", MemoryChatPlugin(memchat=chat))
    serving = asyncio.create_task(serve_without_http(settings, db))
    connected = asyncio.ensure_future(chat.connected.wait())
    await asyncio.wait({serving, connected}, return_when=asyncio.FIRST_COMPLETED)
    assert not serving.done(), serving.exception()  # it did not fail before connecting
    assert not chat.disconnected
    signal.raise_signal(signal.SIGTERM)  # what stops `opencrab up`
    await serving
    assert chat.disconnected
