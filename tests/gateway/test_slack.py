"""The Slack gateway through the real slack_sdk clients against a fake Slack on 127.0.0.1
(tests/fakes/slack_server.py): Socket Mode envelopes over a WebSocket, the Web API over
HTTP, the Events API's signed requests; the model is tests/fakes' scripted provider."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.core.tools import tool_id
from opencrab.core.workspace import Workspace
from opencrab.errors import ConfigError
from opencrab.gateway import slack as slack_module
from opencrab.gateway.configs import SlackConfig
from opencrab.gateway.serve import GatewayRunner
from opencrab.gateway.slack import SlackGateway
from opencrab.messages import MessageContent, MessageTarget, OutgoingMessage, session_for
from opencrab.schedules.service import create_schedule
from opencrab.schedules.spec import ScheduleInput
from opencrab.tickets import service as tickets
from tests.core.conftest import calls, speak
from tests.fakes.chat_gateway import MemoryChat
from tests.fakes.inbox_items import ask
from tests.fakes.schedule_runs import run_to_its_end
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.slack_server import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    FakeSlack,
    signed,
)

USER = "U0MINA"


async def until(check: Callable[[], bool], *, timeout: float = 60) -> None:
    """Until `check()` holds (looked at every few milliseconds)."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


def config(fake: FakeSlack, **extra: Any) -> SlackConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "bot_token": SecretStr(BOT_TOKEN),
        "app_token": SecretStr(APP_TOKEN),
        "api_url": fake.api_url,
        "allow_users": [USER],
        "ping_interval_secs": 0.2,
        "retry_first_secs": 0.05,
        "retry_cap_secs": 0.2,
        **extra,
    }
    return SlackConfig(**values)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = FakeSlack()
    await slack.up()
    yield slack
    await slack.down()


@contextlib.asynccontextmanager
async def running(
    runtime: Runtime, agent: Agent, fake: FakeSlack, **extra: Any
) -> AsyncIterator[SlackGateway]:
    gateway = SlackGateway(config(fake, **extra), runtime)
    await gateway.connect()
    runtime.outlets["slack"] = gateway
    task = asyncio.create_task(GatewayRunner(gateway, runtime, agent).run())
    try:
        await until(lambda: gateway.connection.state.state == "connected")
        yield gateway
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await gateway.disconnect()
        runtime.outlets.pop("slack", None)


def mention(text: str, *, ts: str, channel: str = "C0GARDEN", user: str = USER) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }


# ------------------------------------------------------------------ Socket Mode
async def test_a_mention_runs_a_turn_and_the_reply_goes_to_its_thread(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    scripted.outcomes.clear()
    long = " ".join(f"Sentence {i} about watering tomatoes in the morning." for i in range(120))
    scripted.then(speak(long), speak("今日は水やりの日です。"))
    async with running(runtime, agent, fake) as gateway:
        assert gateway.bot_user_id == BOT_USER
        ack = await fake.push("events_api", fake.event(mention("How are the tomatoes?", ts="1.1")))
        assert set(ack) == {"envelope_id"}  # acknowledged, nothing more
        await fake.wait(lambda: len(fake.posted) >= 2)
        assert all(p["channel"] == "C0GARDEN" and p["thread_ts"] == "1.1" for p in fake.posted)
        assert all(len(p["text"]) <= 3900 for p in fake.posted)
        assert " ".join(p["text"] for p in fake.posted) == long
        count = len(fake.posted)

        # a second mention in the same thread continues the same session
        follow = {**mention("今日は？", ts="1.5"), "thread_ts": "1.1"}
        await fake.push("events_api", fake.event(follow))
        await fake.wait(lambda: len(fake.posted) > count)
    assert fake.posted[-1]["text"] == "今日は水やりの日です。"
    assert fake.posted[-1]["thread_ts"] == "1.1"
    session = session_for("slack", f"{TEAM}/C0GARDEN/1.1", agent.id)
    messages = session_messages(runtime.db, session, limit=10)
    assert [(m.role, m.content) for m in messages][::2] == [
        ("user", "How are the tomatoes?"),
        ("user", "今日は？"),
    ]


async def test_a_direct_message_is_answered_in_the_dm_and_a_slash_command_in_the_channel(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    Workspace.for_agent(runtime.settings, agent.id).write("plan.md", "# 計画\n")
    scripted.outcomes.clear()
    scripted.then(speak("Hello in private; see `plan.md`."), speak("From the command."))
    async with running(runtime, agent, fake):
        direct = {
            "type": "message",
            "channel_type": "im",
            "channel": "D0MINA",
            "user": USER,
            "text": "hi there",
            "ts": "2.1",
        }
        await fake.push("events_api", fake.event(direct))
        await fake.wait(lambda: len(fake.posted) == 1 and len(fake.completed) == 1)
        assert fake.posted[0]["channel"] == "D0MINA"
        assert fake.posted[0].get("thread_ts") is None
        assert fake.posted[0]["text"] == "Hello in private; see `plan.md`."
        assert fake.completed[0]["channel_id"] == "D0MINA"  # the file it names, uploaded
        assert [u["data"] for u in fake.uploads.values()] == ["# 計画\n".encode()]

        command = {
            "command": "/crab",
            "text": "aki what should I plant?",
            "user_id": USER,
            "user_name": "mina",
            "channel_id": "C0GARDEN",
            "team_id": TEAM,
            "trigger_id": "trig.1",
        }
        ack = await fake.push("slash_commands", command)
        assert ack["payload"]["text"] == "Asked aki; the answer follows here."
        await fake.wait(lambda: len(fake.posted) == 2)
        assert fake.posted[1]["channel"] == "C0GARDEN"
        assert fake.posted[1].get("thread_ts") is None
        assert fake.posted[1]["text"] == "From the command."

        unknown = await fake.push("slash_commands", {**command, "text": "nobody hello"})
        assert unknown["payload"]["text"] == "No agent is named 'nobody'."
        stranger = await fake.push("slash_commands", {**command, "user_id": "U0EVE"})
        assert stranger["payload"]["text"] == "You are not on this bot's allow-list."
    assert len(fake.posted) == 2


async def test_bots_strangers_and_other_events_are_ignored(
    runtime: Runtime, agent: Agent, fake: FakeSlack
) -> None:
    gateway = SlackGateway(config(fake), runtime)
    gateway.bot_user_id = BOT_USER
    for event in [
        mention("hi", ts="3.1", user="U0EVE"),  # not on the allow-list
        {**mention("hi", ts="3.2"), "bot_id": "B0OTHER"},  # a bot
        {**mention("hi", ts="3.3"), "user": BOT_USER},  # itself
        {**mention("hi", ts="3.4"), "subtype": "message_changed"},  # an edit
        {**mention("hi", ts="3.5"), "type": "message", "channel_type": "channel"},  # no mention
    ]:
        await gateway.on_event_callback(fake.event(event))
    assert gateway.queue.empty()

    anyone = SlackGateway(config(fake, allow_users=[], allow_channels=["C0GARDEN"]), runtime)
    anyone.bot_user_id = BOT_USER
    await anyone.on_event_callback(fake.event(mention("hi", ts="3.6", user="U0EVE")))
    assert (await anyone.receive()).content.text == "hi"  # the channel is allowed
    nobody = SlackGateway(config(fake, allow_users=[]), runtime)
    await nobody.on_event_callback(fake.event(mention("hi", ts="3.7")))
    assert nobody.queue.empty()  # both lists empty: nobody


async def test_missing_tokens_are_config_errors_naming_the_key(
    runtime: Runtime, fake: FakeSlack
) -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        await SlackGateway(
            config(fake, bot_token=SecretStr("${SLACK_BOT_TOKEN}")), runtime
        ).connect()
    with pytest.raises(ConfigError, match="app_token"):
        await SlackGateway(config(fake, app_token=None), runtime).connect()
    with pytest.raises(ConfigError, match="signing_secret"):
        await SlackGateway(config(fake, mode="events"), runtime).connect()


async def test_an_approval_button_decides_the_held_call_and_the_answer_follows(
    runtime: Runtime, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    agent = runtime.agents.create(
        AgentCreate(name="kai", prompt="You run things.", tool_ids=[tool_id("execute_command")])
    )
    settings = ToolSettings(execute_command=True, approvals={"execute_command": "always"})
    save_tool_settings(runtime.db, agent.id, settings)
    scripted.outcomes.clear()
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    runtime.approvals.follow_ups.start()
    async with running(runtime, agent, fake):
        await fake.push("events_api", fake.event(mention("Run it", ts="4.1")))
        await fake.wait(lambda: len(fake.posted) == 1)
        held = fake.posted[0]
        [pending] = runtime.approvals.list_approvals(status="pending")
        assert held["thread_ts"] == "4.1"
        section, actions = held["blocks"]
        assert pending.id in section["text"]["text"]
        approve, deny = actions["elements"]
        assert approve["text"]["text"] == "Approve"
        assert approve["style"] == "primary"
        assert deny["value"] == f"ap:{pending.id}:n"

        stranger = {
            "type": "block_actions",
            "user": {"id": "U0EVE", "username": "eve"},
            "channel": {"id": "C0GARDEN"},
            "message": {"ts": held["_ts"], "text": held["text"], "thread_ts": "4.1"},
            "actions": [
                {"type": "button", "action_id": approve["action_id"], "value": approve["value"]}
            ],
        }
        await fake.push("interactive", stranger)
        pressed = {**stranger, "user": {"id": USER, "username": "mina"}}
        await fake.push("interactive", pressed)
        await fake.wait(lambda: len(fake.posted) == 2 and len(fake.updated) == 1)
    assert fake.posted[1]["text"] == "It printed made."
    assert fake.posted[1]["thread_ts"] == "4.1"
    [update] = fake.updated  # the stranger's press did nothing
    assert update["ts"] == held["_ts"]
    blocks = (
        update["blocks"] if isinstance(update["blocks"], list) else json.loads(update["blocks"])
    )
    assert blocks[-1]["elements"][0]["text"] == "Approved: the call runs."
    assert [b["type"] for b in blocks] == ["section", "context"]  # the buttons are gone
    [decided] = runtime.approvals.list_approvals(status="approved")
    assert decided.decided_by == "slack:mina"


async def test_inbox_notices_get_buttons_and_a_channel_message_needs_no_thread(
    runtime: Runtime, agent: Agent, fake: FakeSlack
) -> None:
    async with running(runtime, agent, fake) as gateway:
        notice = OutgoingMessage(
            content=MessageContent(text="2 things wait for you."),
            target=MessageTarget(gateway="slack", channel_id="C0ALERTS"),
            metadata={
                "inbox": [
                    {"kind": "approval", "subjectId": "1f0e", "summary": "run echo"},
                    {"kind": "budget", "subjectId": "b1", "summary": "over"},
                ]
            },
        )
        await gateway.send(notice)
        heartbeat = OutgoingMessage(
            content=MessageContent(text="Good morning."),
            target=MessageTarget(gateway="slack", channel_id="C0HOME"),
        )
        await gateway.send(heartbeat)
    first, second = fake.posted
    assert first["channel"] == "C0ALERTS"
    assert first.get("thread_ts") is None
    labels = [e["text"]["text"] for e in first["blocks"][1]["elements"]]
    assert labels == ["Approve", "Deny"]
    assert second == {**second, "channel": "C0HOME", "text": "Good morning."}
    assert second.get("blocks") is None


async def test_a_post_schedule_speaks_in_a_slack_channel(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    """A schedule's `post` (issue 37) names the Slack gateway and a channel: its run's
    reply is posted there through the running gateway, and the run records its session."""
    given = ScheduleInput.model_validate(
        {
            "cron": "0 9 * * 1-5",
            "timezone": "Asia/Tokyo",
            "action": {
                "kind": "post",
                "prompt": "Write the stand-up summary.",
                "home": {"gateway": "slack", "channel": "C0STANDUP"},
            },
        }
    )
    schedule = create_schedule(runtime.db, runtime.settings, agent.id, given, created_by="test")
    scripted.outcomes.clear()
    scripted.then(speak("Stand-up: all green."))
    async with running(runtime, agent, fake):
        run = await run_to_its_end(runtime, schedule.id)
    assert (run.status, run.detail) == ("succeeded", "Stand-up: all green."), run
    assert run.session_id == session_for("slack", "C0STANDUP", agent.id)
    [posted] = fake.posted
    assert (posted["channel"], posted["text"]) == ("C0STANDUP", "Stand-up: all green.")
    assert posted.get("thread_ts") is None


async def test_an_inbox_question_opens_a_modal_whose_answer_resumes_the_ticket(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    ticket_id, session = ask(runtime.db, agent.id, "Which branch should I use?")
    question = {"kind": "ticket_question", "subjectId": session, "summary": "Which branch?"}
    async with running(runtime, agent, fake) as gateway:
        await gateway.send(
            OutgoingMessage(
                content=MessageContent(text="1 item waits for you."),
                target=MessageTarget(gateway="slack", channel_id="C0ALERTS"),
                metadata={"inbox": [question]},
            )
        )
        [notice] = fake.posted
        [button] = notice["blocks"][1]["elements"]
        assert (button["text"]["text"], button["value"]) == ("Answer question", f"tq:{session}")
        pressed = {
            "type": "block_actions",
            "trigger_id": "1334.7384.80888d88f008e0",
            "user": {"id": USER, "username": "mina"},
            "channel": {"id": "C0ALERTS"},
            "message": {"ts": notice["_ts"], "text": notice["text"]},
            "actions": [
                {"type": "button", "action_id": button["action_id"], "value": f"tq:{session}"}
            ],
        }
        await fake.push("interactive", pressed)
        await fake.wait(lambda: len(fake.views) == 1)
        [opened] = fake.views
        assert opened["trigger_id"] == pressed["trigger_id"]
        view = opened["view"]
        assert (view["type"], view["blocks"][0]["element"]["type"]) == ("modal", "plain_text_input")

        def submitted(user: dict[str, str], text: str) -> dict[str, Any]:
            value = {"type": "plain_text_input", "value": text}
            return {
                "type": "view_submission",
                "user": user,
                "view": {
                    "id": "V0001",
                    "callback_id": view["callback_id"],
                    "private_metadata": view["private_metadata"],
                    "state": {"values": {"answer": {"text": value}}},
                },
            }

        await fake.push("interactive", submitted({"id": "U0EVE", "username": "eve"}, "Drop it."))
        await fake.push("interactive", submitted({"id": USER, "username": "mina"}, "Use main."))
        await fake.wait(lambda: len(fake.posted) == 2)
    said = fake.posted[1]
    assert (said["channel"], said["thread_ts"]) == ("C0ALERTS", notice["_ts"])
    assert said["text"] == f"<@{USER}>: Answer sent: the ticket goes on."
    assert tickets.get_ticket(runtime.db, ticket_id).status == "running"
    answers = [m for m in session_messages(runtime.db, session) if m.role == "user"]
    assert [(m.content, m.speaker_id) for m in answers] == [("Use main.", "slack:mina")]
    assert scripted.requests == []  # no turn ran here: the answer went to the ticket


async def test_a_file_goes_into_the_workspace_and_a_named_file_comes_back(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    ws = Workspace.for_agent(runtime.settings, agent.id)
    ws.write("summary.md", "# 要約\nAll well.\n")
    fake.private_files["notes.txt"] = "トマトの記録\n".encode() * 100
    scripted.outcomes.clear()
    scripted.then(speak("I read it and wrote `summary.md` (see `not/there.txt`)."))
    event = {
        **mention("Summarise this", ts="5.1"),
        "files": [
            {
                "id": "F0NOTES",
                "name": "notes.txt",
                "mimetype": "text/plain",
                "size": len(fake.private_files["notes.txt"]),
                "url_private_download": fake.file_url("notes.txt"),
            },
            {"id": "F0EVIL", "name": "evil.txt", "url_private_download": "http://evil.test/x"},
        ],
    }
    async with running(runtime, agent, fake):
        await fake.push("events_api", fake.event(event))
        await fake.wait(lambda: len(fake.completed) == 1)
    kept = "slack/5-1-notes.txt"
    assert ws.read_bytes(kept) == fake.private_files["notes.txt"]
    session = session_for("slack", f"{TEAM}/C0GARDEN/5.1", agent.id)
    asked = session_messages(runtime.db, session, limit=10)[0].content
    assert f"[file saved in your workspace: {kept} (1900 bytes)]" in asked
    assert "[the file evil.txt could not be kept: its address is not one of Slack's]" in asked
    [upload] = fake.uploads.values()
    assert upload["filename"] == "summary.md"
    assert upload["data"] == "# 要約\nAll well.\n".encode()
    [done] = fake.completed
    assert done["channel_id"] == "C0GARDEN"
    assert done["thread_ts"] == "5.1"


async def test_a_file_over_the_workspace_quota_is_refused_and_nothing_is_kept(
    runtime: Runtime, agent: Agent, fake: FakeSlack
) -> None:
    runtime.settings.agent.max_workspace_size_mb = 1
    fake.private_files["big.bin"] = b"x" * (2 * 1024 * 1024)
    gateway = SlackGateway(config(fake), runtime)
    await gateway.connect()
    try:
        event = {
            **mention("keep this", ts="6.1"),
            "files": [{"id": "F0BIG", "name": "big.bin", "url_private": fake.file_url("big.bin")}],
        }
        await gateway.on_event_callback(fake.event(event))
        message = await gateway.receive()
    finally:
        await gateway.disconnect()
    assert "[the file big.bin could not be kept:" in message.content.text
    assert not Workspace.for_agent(runtime.settings, agent.id).exists("slack/6-1-big.bin")


async def test_slack_down_then_back_retries_and_nothing_else_is_affected(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, fake: FakeSlack
) -> None:
    scripted.outcomes.clear()
    scripted.then(speak("Still here."), speak("Back again."))
    other = MemoryChat()
    other_task = asyncio.create_task(GatewayRunner(other, runtime, agent).run())
    try:
        async with running(runtime, agent, fake) as gateway:
            await fake.down()
            await until(lambda: gateway.connection.state.state == "retrying")
            assert gateway.connection.state.error
            assert BOT_TOKEN not in json.dumps(gateway.connection.state.as_json())

            other.post("anyone there?")  # another gateway answers meanwhile
            await asyncio.wait_for(other.replied.wait(), 60)
            assert other.sent[0].content.text == "Still here."

            await fake.up()  # the same port again
            await until(lambda: gateway.connection.state.state == "connected")
            assert fake.connections == 2
            await fake.push("events_api", fake.event(mention("and now?", ts="7.1")))
            await fake.wait(lambda: len(fake.posted) == 1)
            assert fake.posted[0]["text"] == "Back again."
        assert gateway.connection.state.state == "stopped"
    finally:
        other_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await other_task


# ------------------------------------------------------------------ the Events API
@pytest.fixture
async def events(
    runtime: Runtime, agent: Agent, fake: FakeSlack
) -> AsyncIterator[tuple[SlackGateway, httpx.AsyncClient]]:
    gateway = SlackGateway(
        config(fake, mode="events", app_token=None, signing_secret=SecretStr(SIGNING_SECRET)),
        runtime,
    )
    await gateway.connect()
    runtime.outlets["slack"] = gateway
    app = FastAPI()
    app.state.runtime = runtime
    slack_module.register_routes(app)
    task = asyncio.create_task(GatewayRunner(gateway, runtime, agent).run())
    transport = httpx.ASGITransport(app=app)
    try:
        await until(lambda: gateway.connection.state.state == "connected")
        async with httpx.AsyncClient(transport=transport, base_url="http://crab.test") as client:
            yield gateway, client
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await gateway.disconnect()
        runtime.outlets.pop("slack", None)


async def test_events_api_refuses_bad_signatures_and_stale_timestamps(
    events: tuple[SlackGateway, httpx.AsyncClient], fake: FakeSlack
) -> None:
    gateway, client = events
    body = json.dumps({"type": "url_verification", "challenge": "c-123"}).encode()
    ok = await client.post("/hooks/slack/events", content=body, headers=signed(body))
    assert ok.status_code == 200
    assert ok.json() == {"challenge": "c-123"}
    wrong = signed(body, secret="not-the-secret")
    assert (
        await client.post("/hooks/slack/events", content=body, headers=wrong)
    ).status_code == 401
    stale = signed(body, at=int(time.time()) - 6 * 60)
    assert (
        await client.post("/hooks/slack/events", content=body, headers=stale)
    ).status_code == 401
    tampered = signed(body)
    changed = body.replace(b"c-123", b"c-999")
    refused = await client.post("/hooks/slack/events", content=changed, headers=tampered)
    assert refused.status_code == 401
    assert (await client.post("/hooks/slack/events", content=body)).status_code == 401
    form = b"command=%2Fcrab&text=aki+hi&user_id=U0MINA&channel_id=C0GARDEN"
    assert (
        await client.post("/hooks/slack/commands", content=form, headers=signed(form, secret="x"))
    ).status_code == 401
    assert gateway.queue.empty()


async def test_events_api_handles_a_retried_event_once_and_takes_commands_and_buttons(
    events: tuple[SlackGateway, httpx.AsyncClient],
    runtime: Runtime,
    agent: Agent,
    scripted: ScriptedProvider,
    fake: FakeSlack,
) -> None:
    _, client = events
    scripted.outcomes.clear()
    scripted.then(speak("Once."), speak("Commanded."))
    body = json.dumps(fake.event(mention("hello", ts="8.1"), event_id="Ev0SAME")).encode()
    first = await client.post("/hooks/slack/events", content=body, headers=signed(body))
    retry = {**signed(body), "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    again = await client.post("/hooks/slack/events", content=body, headers=retry)
    assert first.status_code == again.status_code == 200
    await fake.wait(lambda: len(fake.posted) == 1)
    assert fake.posted[0]["thread_ts"] == "8.1"

    form = (
        "command=%2Fcrab&text=aki+plant+what%3F&user_id=U0MINA&user_name=mina"
        f"&channel_id=C0GARDEN&team_id={TEAM}&trigger_id=t.2"
    ).encode()
    answer = await client.post(
        "/hooks/slack/commands",
        content=form,
        headers={**signed(form), "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.json() == {
        "response_type": "ephemeral",
        "text": "Asked aki; the answer follows here.",
    }
    await fake.wait(lambda: len(fake.posted) == 2)
    assert fake.posted[1]["text"] == "Commanded."

    pressed = {
        "type": "block_actions",
        "user": {"id": USER, "username": "mina"},
        "channel": {"id": "C0GARDEN"},
        "message": {"ts": "9.9", "text": "waits"},
        "actions": [{"type": "button", "action_id": "ap:0000:y", "value": "ap:0000:y"}],
    }
    payload = urlencode({"payload": json.dumps(pressed)}).encode()
    button = await client.post("/hooks/slack/interactive", content=payload, headers=signed(payload))
    assert button.status_code == 200
    await fake.wait(lambda: len(fake.updated) == 1)
    assert "Not done:" in json.dumps(fake.updated[0]["blocks"])  # no such approval
    session = session_for("slack", f"{TEAM}/C0GARDEN/8.1", agent.id)
    assert len(session_messages(runtime.db, session, limit=10)) == 2  # the retry ran no turn
