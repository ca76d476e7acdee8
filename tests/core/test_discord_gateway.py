"""The Discord gateway driven with discord.py's own objects; sending is stubbed at its HTTP
client (`http.send_message`), so discord.py's real send code runs and nothing leaves."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import discord
import pytest
from pydantic import SecretStr

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.core.tools import tool_id
from opencrab.errors import ConfigError, NotFoundError, ProviderServerError
from opencrab.gateway.configs import DiscordConfig
from opencrab.gateway.discord import DiscordGateway, split_message, utf16_len
from opencrab.gateway.serve import GatewayRunner, agent_for
from opencrab.messages import DiscordSource, session_for
from tests.core.conftest import calls, speak
from tests.fakes.discord_client import CHANNEL, GUILD, OTHER_CHANNEL, OTHER_GUILD, FakeDiscord
from tests.fakes.scripted_provider import ScriptedProvider, reply


def config(**extra: Any) -> DiscordConfig:
    return DiscordConfig(enabled=True, token=SecretStr("t"), guild_ids=[GUILD], **extra)


# ------------------------------------------------------------------ splitting
def test_long_replies_split_within_discords_limit() -> None:
    paragraphs = "\n".join(f"Line {i}: " + "tomato " * 20 for i in range(60))
    pieces = split_message(paragraphs)
    assert len(pieces) > 1
    assert all(utf16_len(p) <= 2000 for p in pieces)
    assert all(p.startswith("Line ") for p in pieces)  # cut at line breaks
    assert " ".join(pieces).split() == paragraphs.split()  # nothing lost

    emoji = "🍅" * 1500  # 2 UTF-16 units each: Discord counts 3,000
    assert [utf16_len(p) for p in split_message(emoji)] == [2000, 1000]
    word = "x" * 4500
    assert [len(p) for p in split_message(word)] == [2000, 2000, 500]
    assert split_message("   ") == []
    assert split_message("short") == ["short"]


# ------------------------------------------------------------------ filtering
def test_only_allowed_guilds_channels_and_humans_are_answered() -> None:
    fake = FakeDiscord()
    gateway = DiscordGateway(config(), client=fake.client)
    assert gateway.accepts(fake.message("hello"))
    assert not gateway.accepts(fake.message("hello", guild=OTHER_GUILD))
    assert not gateway.accepts(fake.message("beep", bot=True))
    assert not gateway.accepts(fake.message("   "))
    narrow = DiscordGateway(config(channel_ids=[OTHER_CHANNEL]), client=FakeDiscord().client)
    assert not narrow.accepts(fake.message("hello"))
    assert narrow.accepts(fake.message("hello", channel=OTHER_CHANNEL))
    mention = DiscordGateway(config(mention_only=True), client=FakeDiscord().client)
    assert not mention.accepts(fake.message("hello"))  # the bot is not logged in: no mention


async def test_an_empty_allow_list_or_missing_token_refuses_to_start() -> None:
    with pytest.raises(ConfigError, match="guild_ids is empty"):
        DiscordGateway(DiscordConfig(enabled=True, token=SecretStr("t")))
    gateway = DiscordGateway(
        DiscordConfig(enabled=True, token=SecretStr("${DISCORD_TOKEN}"), guild_ids=[GUILD]),
        client=FakeDiscord().client,
    )
    with pytest.raises(ConfigError, match="DISCORD_TOKEN"):
        await gateway.connect()


# ------------------------------------------------------------------ end to end
async def test_a_channel_message_runs_a_turn_and_the_reply_goes_back_split(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    fake = FakeDiscord()
    gateway = DiscordGateway(config(), client=fake.client)
    runner = GatewayRunner(gateway, runtime, agent)
    long_reply = "\n".join(f"Step {i}: water the tomatoes and check the soil." for i in range(90))
    scripted.outcomes.clear()
    scripted.then(speak(long_reply), speak("Fridays."), speak("Hello, other channel."))

    await gateway.on_message(fake.message("How do I care for tomatoes?"))
    incoming = await gateway.receive()
    assert incoming.source == DiscordSource(guild_id=str(GUILD), channel_id=str(CHANNEL))
    assert incoming.sender.name == "Mina"
    sent = await runner.handle(incoming)
    assert sent == long_reply
    assert len(fake.sent) > 1
    assert {channel for channel, _ in fake.sent} == {CHANNEL}
    assert all(len(p["content"]) <= 2000 for _, p in fake.sent)
    assert "\n".join(p["content"] for _, p in fake.sent) == long_reply
    assert all(p["allowed_mentions"] == {"parse": []} for _, p in fake.sent)

    await gateway.on_message(fake.message("When?"))
    await runner.handle(await gateway.receive())
    session = session_for("discord", f"{GUILD}/{CHANNEL}", agent.id)
    messages = session_messages(runtime.db, session, limit=100)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[2].content == "When?"

    await gateway.on_message(fake.message("hi", channel=OTHER_CHANNEL))
    await runner.handle(await gateway.receive())
    other = session_for("discord", f"{GUILD}/{OTHER_CHANNEL}", agent.id)
    assert other != session
    assert [m.content for m in session_messages(runtime.db, other, limit=10)] == [
        "hi",
        "Hello, other channel.",
    ]
    assert fake.sent[-1] == (OTHER_CHANNEL, fake.sent[-1][1])


async def test_a_failed_turn_is_answered_with_a_short_apology(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    fake = FakeDiscord()
    gateway = DiscordGateway(config(), client=fake.client)
    scripted.outcomes.clear()
    scripted.then(ProviderServerError("upstream down", provider="openai"))
    await gateway.on_message(fake.message("hello"))
    sent = await GatewayRunner(gateway, runtime, agent).handle(await gateway.receive())
    assert sent is not None
    assert sent.startswith("Sorry, I could not answer that (")
    assert fake.sent[0][1]["content"] == sent


async def test_a_message_with_no_text_runs_no_turn_and_is_told_why(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    fake = FakeDiscord()
    gateway = DiscordGateway(config(), client=fake.client)
    photo = fake.message("")
    photo.attachments = [
        discord.Attachment(
            data={  # type: ignore[typeddict-item]
                "id": "7",
                "filename": "tomato.png",
                "size": 10,
                "url": "https://cdn.example/tomato.png",
                "proxy_url": "https://cdn.example/tomato.png",
                "content_type": "image/png",
            },
            state=fake.state,
        )
    ]
    assert gateway.accepts(photo)
    await gateway.on_message(photo)
    asked = len(scripted.requests)
    sent = await GatewayRunner(gateway, runtime, agent).handle(await gateway.receive())
    assert sent is not None
    assert "empty" in sent
    assert len(scripted.requests) == asked  # no turn ran
    session = session_for("discord", f"{GUILD}/{CHANNEL}", agent.id)
    with pytest.raises(NotFoundError):  # not even an empty session was made
        session_messages(runtime.db, session, limit=10)


async def test_the_agent_is_the_configured_one_or_the_only_one(
    runtime: Runtime, agent: Agent
) -> None:
    assert agent_for(runtime, None, "discord").id == agent.id
    assert agent_for(runtime, "aki", "discord").id == agent.id
    runtime.agents.create(AgentCreate(name="second", prompt="p"))
    with pytest.raises(ConfigError, match="there are 2 agents"):
        agent_for(runtime, None, "discord")


async def test_a_held_call_is_announced_in_the_channel_and_the_answer_follows_there(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(
        AgentCreate(name="kai", prompt="You run things.", tool_ids=[tool_id("execute_command")])
    )
    settings = ToolSettings(execute_command=True, approvals={"execute_command": "always"})
    save_tool_settings(runtime.db, agent.id, settings)
    fake = FakeDiscord()
    gateway = DiscordGateway(config(), client=fake.client)
    scripted.outcomes.clear()
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    running = asyncio.create_task(GatewayRunner(gateway, runtime, agent).run())
    runtime.approvals.follow_ups.start()  # as every process running background work does
    try:
        await gateway.on_message(fake.message("Run it"))
        async with asyncio.timeout(60):
            while not fake.sent:  # the held turn's answer
                await asyncio.sleep(0.05)
        [(channel, held)] = fake.sent
        assert channel == CHANNEL
        assert "execute_command waits for a person's approval" in held["content"]
        [pending] = runtime.approvals.list_approvals(status="pending")
        assert pending.id in held["content"]

        await runtime.approvals.decide(pending.id, approve=True, by="ops")
        async with asyncio.timeout(60):
            while len(fake.sent) < 2:
                await asyncio.sleep(0.05)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert fake.sent[1] == (CHANNEL, fake.sent[1][1])
    assert fake.sent[1][1]["content"] == "It printed made."
    session = session_for("discord", f"{GUILD}/{CHANNEL}", agent.id)
    messages = session_messages(runtime.db, session, limit=10)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Run it"),
        ("assistant", "It printed made."),
    ]
