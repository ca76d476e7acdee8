"""A gateway from a plugin is a first-class gateway: configured under its own
`[gateway.<name>]` table (checked by its own model), chatting with an agent, an agent's
heartbeat home and the budget alerts' outlet — with core naming no gateway.

The plugin (tests/fakes/parrot_gateway.py) imports only from `opencrab.ext`.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import opencrab
from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate, AgentUpdate, ChannelHome, HeartbeatConfig
from opencrab.core.heartbeat import heartbeat_scheduler, pulse_for
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.errors import ConfigError
from opencrab.gateway.serve import start_chat_gateways, stop_chat_gateways
from opencrab.messages import MessageTarget, session_for
from opencrab.plugins import plugin_manager
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes import parrot_gateway
from tests.fakes.parrot_gateway import ParrotConfig, ParrotGateway
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.scripted_runtime import scripted_runtime

PARROT = """\
[gateway.parrot]
enabled = true
agent = "aki"
room_prefix = "garden-"

[budgets]
alert_outlet = { gateway = "parrot", channel = "alerts" }
"""


@pytest.fixture
def parrot() -> Iterator[None]:
    """The parrot plugin, registered as a module the way an entry point registers one."""
    plugin_manager().register(parrot_gateway, name="parrot-plugin")
    ParrotGateway.built.clear()
    yield
    plugin_manager().unregister(name="parrot-plugin")
    ParrotGateway.built.clear()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_plugin_imports_only_opencrab_ext() -> None:
    tree = ast.parse(Path(parrot_gateway.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert {name for name in imported if name.split(".")[0] == "opencrab"} == {"opencrab.ext"}


PLATFORMS = re.compile(r"\bdiscord|\bslack\b|\btelegram|\bline(?:bot|_bot|\.me)\b|linebot", re.I)
"""How a chat platform would be named in code (the word "line" alone is too common)."""


def test_core_and_the_floors_under_the_gateways_name_no_platform() -> None:
    """Homes and alert outlets are (gateway, channel) pairs: no built-in is special there;
    the platforms (Discord, Slack, Telegram, LINE) live in their gateway modules alone."""
    package = Path(opencrab.__file__).parent
    named = [
        f"{path.relative_to(package)}:{number}"
        for folder in ("core", "tickets", "schedules", "inbox", "llm", "actions")
        for path in sorted((package / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PLATFORMS.search(line)
    ]
    assert named == []
    assert PLATFORMS.search("from linebot.v3 import messaging")  # the rule can fail


def test_its_table_is_read_with_its_own_model(parrot: None, tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path / "c.toml", PARROT))
    table = settings.gateway.parrot
    assert isinstance(table, ParrotConfig)
    assert (table.enabled, table.agent, table.room_prefix) == (True, "aki", "garden-")
    assert settings.gateway.table("parrot", ParrotConfig) is table
    assert settings.budgets.alert_outlet is not None
    assert (settings.budgets.alert_outlet.gateway, settings.budgets.alert_outlet.channel) == (
        "parrot",
        "alerts",
    )
    shown = {key: value for key, value, _, _ in settings_values(settings)}
    assert shown["gateway.parrot.room_prefix"] == "garden-"  # `opencrab config` shows it


def settings_values(settings: Settings) -> list[tuple[str, object, str, str]]:
    from opencrab.config.provenance import effective_values

    return effective_values(settings)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[gateway.parrot]\ncolour = "red"\n', "gateway.parrot.colour: unknown key for the parrot"),
        ("[gateway.parrot]\nroom_prefix = 3\n", "gateway.parrot.room_prefix: Input should be"),
        ("[gateway.pigeon]\nenabled = true\n", "gateway.pigeon: unknown gateway 'pigeon'"),
    ],
)
def test_a_bad_table_is_a_config_error_naming_the_file_and_key(
    parrot: None, tmp_path: Path, table: str, problem: str
) -> None:
    file = write(tmp_path / "bad.toml", table)
    with pytest.raises(ConfigError) as caught:
        load_settings(file)
    assert f"{file}: {problem}" in str(caught.value)


def test_without_the_plugin_its_table_is_an_unknown_gateway(tmp_path: Path) -> None:
    file = write(tmp_path / "c.toml", PARROT)
    with pytest.raises(ConfigError, match=r"gateway\.parrot: unknown gateway 'parrot'"):
        load_settings(file)


@pytest.fixture
async def runtime(
    parrot: None, data_dir: Path, tmp_path: Path, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    """A runtime over settings loaded from a file configuring the parrot gateway."""
    settings = load_settings(write(tmp_path / "parrot.toml", PARROT))
    db = Database(settings.database_url)
    db.upgrade()
    async with scripted_runtime(settings, db, scripted) as rt:
        yield rt
    db.close()


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai", "unscripted reply")


async def test_it_chats_is_a_heartbeat_home_and_the_alert_outlet(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    aki = runtime.agents.create(AgentCreate(name="aki", prompt="You keep the garden."))
    runtime.agents.create(AgentCreate(name="ren", llm=AgentLlmConfig(daily_budget_usd=0)))
    started = await start_chat_gateways(runtime)
    try:
        [(gateway, _)] = started
        assert gateway is ParrotGateway.built[0]
        assert gateway.connected
        assert runtime.outlets["parrot"] is gateway

        # a message in: a turn of the configured agent, the reply out through the gateway
        scripted.outcomes.clear()
        scripted.then(reply("Water them at dawn."))
        gateway.post("When do I water the tomatoes?", room="r1")
        [answer] = await asyncio.wait_for(gateway.next_sent(1), 60)
        assert answer.content.text == "Water them at dawn."
        assert answer.target == MessageTarget(gateway="parrot", channel_id="garden-r1")
        session = session_for("parrot", "garden-r1", aki.id)
        assert [m.content for m in session_messages(runtime.db, session, limit=10)] == [
            "When do I water the tomatoes?",
            "Water them at dawn.",
        ]

        # the room is aki's heartbeat home: a heartbeat's speech reaches it
        home = ChannelHome(gateway="parrot", channel_id="garden-r1")
        assert home.session_for(aki.id) == session  # the conversation's own session
        aki = runtime.agents.update(aki.id, AgentUpdate(heartbeat=HeartbeatConfig(home=home)))
        assert runtime.agents.get(aki.id).heartbeat.home == home  # stored and read back
        scripted.outcomes.clear()  # (the last outcome repeats: replace it)
        scripted.then(speak("The basil needs picking."))
        scheduler = heartbeat_scheduler(runtime)
        scheduler.add(pulse_for(runtime, aki, scheduler))
        tick = await scheduler.tick_now(aki.id)
        assert (tick.result["spoke"], tick.result["delivered"]) == (
            "The basil needs picking.",
            True,
        )
        spoken = (await asyncio.wait_for(gateway.next_sent(2), 60))[1]
        assert spoken.content.text == "The basil needs picking."
        assert spoken.target == MessageTarget(gateway="parrot", channel_id="garden-r1")

        # [budgets] alert_outlet names it: an alert reaches its channel
        result = await runtime.chat(runtime.agents.get("ren"), "hi")  # $0 budget: refused
        assert result.error is not None
        assert result.error.error == "budget_exceeded"
        sent = await asyncio.wait_for(gateway.next_sent(4), 60)
        alerts = sorted(m.content.text for m in sent[2:])
        assert [m.target for m in sent[2:]] == [
            MessageTarget(gateway="parrot", channel_id="alerts")
        ] * 2
        assert alerts[0].startswith("Budget alert: agent ren reached 100% of its daily budget")
        assert alerts[1].startswith("Budget alert: agent ren reached 80% of its daily budget")
    finally:
        await stop_chat_gateways(started)
    assert not ParrotGateway.built[0].connected
