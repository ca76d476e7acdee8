"""The Telegram gateway driven through python-telegram-bot against a fake Bot API on
127.0.0.1 (tests/fakes/telegram_api.py): messages in by long polling or the webhook, a
turn of a scripted model, the reply out replying to the message; commands, approval
buttons, files both ways, the platform down and back, long Japanese replies. No network."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr, ValidationError

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.core.tools import tool_id
from opencrab.core.workspace import Workspace
from opencrab.errors import ConfigError, NotFoundError
from opencrab.gateway import telegram, telegram_webhook
from opencrab.gateway.builtins import Telegram
from opencrab.gateway.configs import TelegramConfig
from opencrab.gateway.serve import GatewayRunner, agent_for
from opencrab.gateway.telegram import TelegramGateway, utf16_len
from opencrab.messages import MessageContent, MessageTarget, OutgoingMessage, session_for
from opencrab.schedules.service import create_schedule
from opencrab.schedules.spec import ScheduleInput
from opencrab.store.repositories import chat_agents
from opencrab.tickets import service as tickets
from tests.core.conftest import calls, runtime, scripted  # noqa: F401 (fixtures)
from tests.fakes.inbox_items import ask
from tests.fakes.schedule_runs import run_to_its_end
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.telegram_api import BOT, FakeTelegram

ALICE = 4242
MALLORY = 6666
GROUP = -100555


@pytest.fixture(scope="module")
def served() -> Iterator[FakeTelegram]:
    with FakeTelegram().serving() as fake:
        yield fake


@pytest.fixture
def fake(served: FakeTelegram) -> FakeTelegram:
    """The module's fake Bot API, emptied for this test."""
    served.down = False
    served.calls.clear()
    served.files.clear()
    served.limited.clear()
    served.webhook = {}
    served.sent.clear()
    with served._lock:
        served._updates.clear()
    return served


@pytest.fixture
def aki(runtime: Runtime) -> Agent:  # noqa: F811
    return runtime.agents.create(AgentCreate(name="aki", prompt="You keep notes."))


def settings_for(fake: FakeTelegram, **extra: Any) -> TelegramConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "token": SecretStr(fake.token),
        "api_url": fake.url,
        "poll_timeout": 1,
        "allow_users": [str(ALICE)],
        "agent": "aki",
    }
    return TelegramConfig(**(values | extra))


@contextlib.asynccontextmanager
async def bot(
    runtime: Runtime,  # noqa: F811
    fake: FakeTelegram,
    *,
    connected: bool = True,
    **extra: Any,
) -> AsyncIterator[TelegramGateway]:
    """The gateway as a server runs it: connected, an outlet, its messages answered."""
    gateway = TelegramGateway(settings_for(fake, **extra), runtime)
    gateway.connection.first, gateway.connection.cap = 0.05, 0.2
    agent = agent_for(runtime, gateway.agent(), gateway.name)
    await gateway.connect()
    runtime.outlets[gateway.name] = gateway
    running = asyncio.create_task(GatewayRunner(gateway, runtime, agent).run())
    try:
        if connected:
            await until(lambda: gateway.connection.state.state == "connected")
        yield gateway
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        runtime.outlets.pop(gateway.name, None)
        await gateway.disconnect()


async def until(condition: Any, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def texts(fake: FakeTelegram) -> list[str]:
    return [c.params["text"] for c in fake.of("sendMessage")]


# ------------------------------------------------------------------ messages and replies
async def test_a_private_message_runs_a_turn_and_the_reply_replies_to_it(
    caplog: pytest.LogCaptureFixture,
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    scripted.outcomes.clear()
    scripted.then(reply("Hello Alice."))
    chat = fake.chat(ALICE)
    caplog.set_level(logging.INFO)
    async with bot(runtime, fake):
        sent = fake.message("hi there", chat=chat, user=fake.user(ALICE, "alice"))
        [answer] = await fake.wait_for("sendMessage")
    assert answer.params["text"] == "Hello Alice."
    assert answer.params["chat_id"] == str(ALICE)
    assert answer.params["reply_parameters"]["message_id"] == sent["message_id"]
    assert fake.of("sendChatAction")[0].params["action"] == "typing"
    assert fake.of("deleteWebhook")  # polling: a webhook left from before is removed
    requests = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert any("/bot***/getMe" in line for line in requests)
    assert fake.token not in caplog.text
    [poll, *_] = fake.of("getUpdates")
    assert poll.params["allowed_updates"] == ["message", "callback_query"]
    messages = session_messages(runtime.db, session_for("telegram", str(ALICE), aki.id), limit=5)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "hi there"),
        ("assistant", "Hello Alice."),
    ]


async def test_groups_answer_mentions_and_replies_and_strangers_and_bots_are_ignored(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    scripted.outcomes.clear()
    scripted.then(reply("one"), reply("two"), reply("three"))
    group = fake.chat(GROUP, "supergroup", "Crew")
    alice = fake.user(ALICE, "alice")
    async with bot(runtime, fake):
        fake.message("just chatting", chat=group, user=alice)  # no mention: not for the bot
        fake.message("@crab_bot hi", chat=fake.chat(MALLORY), user=fake.user(MALLORY, "mal"))
        fake.message("@crab_bot ping", chat=group, user=fake.user(7, "otherbot", bot=True))
        fake.message("hey @crab_bot what's up", chat=group, user=alice)
        [first] = await fake.wait_for("sendMessage")
        fake.message("and you?", chat=group, user=alice, reply_to=_bot_message(group))
        await fake.wait_for("sendMessage", 2)
    assert first.params["chat_id"] == str(GROUP)
    assert texts(fake) == ["one", "two"]
    messages = session_messages(runtime.db, session_for("telegram", str(GROUP), aki.id), limit=9)
    assert [m.content for m in messages if m.role == "user"] == ["hey what's up", "and you?"]
    assert len(scripted.requests) == 2  # nobody else ran a turn


async def test_a_user_allowed_by_username_or_a_chat_allowed_by_id_is_answered(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    scripted.outcomes.clear()
    scripted.then(reply("by name"), reply("by chat"))
    async with bot(runtime, fake, allow_users=["@bob"], allow_channels=[str(GROUP)]):
        fake.message("hi", chat=fake.chat(77), user=fake.user(77, "bob"))
        await fake.wait_for("sendMessage")
        group = fake.chat(GROUP, "group", "Crew")
        fake.message("@crab_bot hi", chat=group, user=fake.user(78, "carol"))
        await fake.wait_for("sendMessage", 2)
    assert texts(fake) == ["by name", "by chat"]


# ------------------------------------------------------------------ commands
async def test_agents_lists_and_use_binds_the_chat_across_a_restart(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    kai = runtime.agents.create(AgentCreate(name="kai", prompt="You run things."))
    scripted.outcomes.clear()
    scripted.then(reply("kai here"))
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    async with bot(runtime, fake):
        fake.message("/start", chat=chat, user=alice)
        fake.message("/agents", chat=chat, user=alice)
        fake.message("/use nobody", chat=chat, user=alice)
        fake.message("/use kai", chat=chat, user=alice)
        await fake.wait_for("sendMessage", 4)
    greeting, listing, unknown, used = texts(fake)
    assert greeting.startswith("Hello!")
    assert "/use <agent>" in greeting
    assert "• aki" in listing
    assert "- kai" in listing
    assert "no agent 'nobody'" in unknown
    assert used == "kai answers in this chat from now on."
    assert chat_agents.load(runtime.db, "telegram") == {str(ALICE): kai.id}
    assert fake._updates == []  # confirmed at the stop: a restart is not given them again

    fake.calls.clear()
    async with bot(runtime, fake):  # a new process: the choice was kept
        fake.message("who is this?", chat=chat, user=alice)
        await fake.wait_for("sendMessage")
    assert texts(fake) == ["kai here"]
    kept = session_messages(runtime.db, session_for("telegram", str(ALICE), kai.id), limit=5)
    assert [m.content for m in kept] == ["who is this?", "kai here"]


async def test_a_chat_pinned_in_the_configuration_keeps_its_agent(
    runtime: Runtime,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    runtime.agents.create(AgentCreate(name="kai", prompt="You run things."))
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    async with bot(runtime, fake, channel_agents={str(ALICE): "aki"}, agents=["aki"]):
        fake.message("/use kai", chat=chat, user=alice)
        fake.message("/agents", chat=chat, user=alice)
        await fake.wait_for("sendMessage", 2)
    refused, listing = texts(fake)
    assert "set in the configuration (aki)" in refused
    assert "kai" not in listing  # `agents` names what /use may pick
    assert chat_agents.load(runtime.db, "telegram") == {}


# ------------------------------------------------------------------ approvals
async def test_an_approval_button_pressed_decides_and_the_follow_up_arrives(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
) -> None:
    kai = runtime.agents.create(
        AgentCreate(name="kai", prompt="You run things.", tool_ids=[tool_id("execute_command")])
    )
    save_tool_settings(
        runtime.db,
        kai.id,
        ToolSettings(execute_command=True, approvals={"execute_command": "always"}),
    )
    scripted.outcomes.clear()
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    runtime.approvals.follow_ups.start()
    async with bot(runtime, fake, agent="kai"):
        fake.message("Run it", chat=chat, user=alice)
        [held] = await fake.wait_for("sendMessage")
        [pending] = runtime.approvals.list_approvals(status="pending")
        keyboard = held.params["reply_markup"]["inline_keyboard"]
        assert [[k["callback_data"] for k in row] for row in keyboard] == [
            [f"ap:{pending.id}:y", f"ap:{pending.id}:n"]
        ]
        shown = {**held.params, "message_id": 9001, "chat": chat, "date": 0, "from": BOT}
        fake.callback(f"ap:{pending.id}:y", message=shown, user=fake.user(MALLORY, "mal"))
        [refused] = await fake.wait_for("answerCallbackQuery")
        assert refused.params["text"] == "Not yours to decide."
        fake.callback(f"ap:{pending.id}:y", message=shown, user=alice)
        [_, answered] = await fake.wait_for("answerCallbackQuery", 2)
        [edited] = await fake.wait_for("editMessageReplyMarkup")
        [_, follow_up] = await fake.wait_for("sendMessage", 2)
    assert answered.params["text"] == "Approved: the call runs."
    assert edited.params["message_id"] == "9001"
    assert "reply_markup" not in edited.params  # the keyboard is gone
    assert follow_up.params["text"] == "It printed made."
    [decided] = runtime.approvals.list_approvals(status="approved")
    assert decided.decided_by == "alice"


async def test_a_post_schedule_speaks_in_a_telegram_group(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    """A schedule's `post` (issue 37) names the Telegram gateway and a chat: its run's
    reply is sent there through the running gateway, and the run records the chat's session."""
    given = ScheduleInput.model_validate(
        {
            "at": "2099-01-01T09:00:00+09:00",
            "action": {
                "kind": "post",
                "prompt": "Summarise the day.",
                "home": {"gateway": "telegram", "channel": str(GROUP)},
            },
        }
    )
    schedule = create_schedule(runtime.db, runtime.settings, aki.id, given, created_by="test")
    scripted.outcomes.clear()
    scripted.then(reply("A quiet day."))
    fake.chat(GROUP, "supergroup", "Crew")
    async with bot(runtime, fake):
        run = await run_to_its_end(runtime, schedule.id)
    assert (run.status, run.detail) == ("succeeded", "A quiet day."), run
    assert run.session_id == session_for("telegram", str(GROUP), aki.id)
    [sent] = fake.of("sendMessage")
    assert (sent.params["chat_id"], sent.params["text"]) == (str(GROUP), "A quiet day.")


async def test_an_inbox_notice_sent_to_a_chat_offers_a_button_pair_per_approval(
    runtime: Runtime,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    items = [
        {"kind": "approval", "subjectId": "a1", "summary": "x"},
        {"kind": "ticket_question", "subjectId": "s1", "summary": "y"},
        {"kind": "approval", "subjectId": "a2", "summary": "z"},
    ]
    async with bot(runtime, fake) as gateway:
        await gateway.send(
            OutgoingMessage(
                content=MessageContent(text="2 approvals wait for you"),
                target=MessageTarget(gateway="telegram", channel_id=str(ALICE)),
                metadata={"inbox": items},
            )
        )
        [notice] = fake.of("sendMessage")
        shown = {**notice.params, "message_id": 9002, "chat": fake.chat(ALICE), "date": 0}
        fake.callback("ap:a1:n", message=shown, user=fake.user(ALICE, "alice"))
        [answered] = await fake.wait_for("answerCallbackQuery")
        [edited] = await fake.wait_for("editMessageReplyMarkup")
    assert "reply_parameters" not in notice.params  # spontaneous: replies to nothing
    rows = notice.params["reply_markup"]["inline_keyboard"]
    assert [[k["text"] for k in row] for row in rows] == [
        ["Approve #1", "Deny #1"],
        ["Approve #2", "Deny #2"],
    ]
    assert answered.params["text"].startswith("Not done:")  # a1 is no approval here
    kept = edited.params["reply_markup"]["inline_keyboard"]
    assert [[k["callback_data"] for k in row] for row in kept] == [["ap:a2:y", "ap:a2:n"]]


async def test_an_inbox_question_is_answered_by_a_reply_to_the_bots_prompt(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    ticket_id, session = ask(runtime.db, aki.id, "Which branch should I use?")
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    question = {"kind": "ticket_question", "subjectId": session, "summary": "Which branch?"}
    async with bot(runtime, fake) as gateway:
        await gateway.send(
            OutgoingMessage(
                content=MessageContent(text="1 item waits for you"),
                target=MessageTarget(gateway="telegram", channel_id=str(ALICE)),
                metadata={"inbox": [question]},
            )
        )
        [notice] = fake.sent
        [[button]] = notice["reply_markup"]["inline_keyboard"]
        assert (button["text"], button["callback_data"]) == ("Answer question", f"tq:{session}")
        fake.callback(button["callback_data"], message=notice, user=fake.user(MALLORY, "mal"))
        [refused] = await fake.wait_for("answerCallbackQuery")
        assert refused.params["text"] == "Not yours to decide."
        fake.callback(button["callback_data"], message=notice, user=alice)
        [_, pressed] = await fake.wait_for("answerCallbackQuery", 2)
        [_, prompt] = await fake.wait_for("sendMessage", 2)
        assert pressed.params["text"] == "Reply to my message with your answer."
        assert prompt.params["reply_markup"]["force_reply"] is True
        assert prompt.params["reply_parameters"]["message_id"] == notice["message_id"]
        asking = fake.sent[1]
        fake.message("Use the main branch.", chat=chat, user=alice, reply_to=asking)
        [*_, confirmed] = await fake.wait_for("sendMessage", 3)
    assert confirmed.params["text"] == "Answer sent: the ticket goes on."
    assert tickets.get_ticket(runtime.db, ticket_id).status == "running"
    answer = session_messages(runtime.db, session)[-1]
    assert (answer.role, answer.content, answer.speaker_id) == (
        "user",
        "Use the main branch.",
        "alice",
    )
    assert scripted.requests == []  # no turn ran: it was the ticket's answer


# ------------------------------------------------------------------ files
async def test_a_document_lands_in_the_workspace_and_a_named_file_goes_out(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    ws = Workspace.for_agent(runtime.settings, aki.id)
    ws.write("out/summary.txt", "the summary\n")
    scripted.outcomes.clear()
    scripted.then(reply("Read it. The summary is in `out/summary.txt`; `missing.txt` is not."))
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    document = fake.document("../../etc/報告 1.csv", b"a,b\n1,2\n")
    async with bot(runtime, fake):
        sent = fake.message(None, chat=chat, user=alice, document=document, caption="see this")
        [out] = await fake.wait_for("sendDocument")
    path = f"telegram/{ALICE}/{sent['message_id']}-etc_報告_1.csv"
    assert ws.read_bytes(path) == b"a,b\n1,2\n"
    [asked, _] = session_messages(runtime.db, session_for("telegram", str(ALICE), aki.id), limit=5)
    assert (
        asked.content == f"see this\n\n[I sent a file: it is in your workspace at {path} (8 bytes)]"
    )
    assert out.files["document"] == ("summary.txt", b"the summary\n")
    assert out.params["reply_parameters"]["message_id"] == sent["message_id"]


async def test_a_photo_with_a_caption_mentioning_the_bot_in_a_group_is_kept_at_its_largest(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    scripted.outcomes.clear()
    scripted.then(reply("A fine cat."))
    group = fake.chat(GROUP, "supergroup", "Crew")
    photo = fake.photo(b"small", b"largest jpeg")
    async with bot(runtime, fake, allow_channels=[str(GROUP)]):
        sent = fake.message(
            None, chat=group, user=fake.user(9, "dan"), photo=photo, caption="@crab_bot look"
        )
        await fake.wait_for("sendMessage")
    path = f"telegram/{-GROUP}/{sent['message_id']}-photo-{sent['message_id']}.jpg"
    ws = Workspace.for_agent(runtime.settings, aki.id)
    assert ws.read_bytes(path) == b"largest jpeg"
    [asked, _] = session_messages(runtime.db, session_for("telegram", str(GROUP), aki.id), limit=5)
    assert asked.content.startswith("look\n\n[I sent a file:")


async def test_a_file_over_the_quota_is_refused_and_stores_nothing(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    runtime.settings.agent.max_workspace_size_mb = 1
    scripted.outcomes.clear()
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    document = fake.document("big.bin", b"x" * (1024 * 1024 + 1))
    async with bot(runtime, fake):
        fake.message(None, chat=chat, user=alice, document=document)
        [told] = await fake.wait_for("sendMessage")
    assert told.params["text"].startswith("Sorry, I could not take that file:")
    assert "quota" in told.params["text"]
    assert not Workspace.for_agent(runtime.settings, aki.id).exists("telegram")
    with pytest.raises(NotFoundError):  # no turn ran: not even a session
        session_messages(runtime.db, session_for("telegram", str(ALICE), aki.id), limit=5)


# ------------------------------------------------------------------ the webhook
async def test_the_webhook_refuses_a_wrong_secret_and_answers_a_right_one(
    monkeypatch: pytest.MonkeyPatch,
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    scripted.outcomes.clear()
    scripted.then(reply("via the webhook"))
    monkeypatch.setattr(telegram, "WEBHOOK_CHECK_EVERY", 0.05)
    app = FastAPI()
    telegram_webhook.register_routes(app)
    app.state.runtime = runtime
    chat, alice = fake.chat(ALICE), fake.user(ALICE, "alice")
    update = {
        "update_id": 1,
        "message": {"message_id": 10, "date": 0, "chat": chat, "from": alice, "text": "hook"},
    }
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://crab") as client:
        assert (await client.post("/hooks/telegram", json=update)).status_code == 404
        async with bot(
            runtime,
            fake,
            mode="webhook",
            webhook_url="https://crab.example/hooks/telegram",
            webhook_secret=SecretStr("s3cret_-token"),
        ):
            assert fake.webhook == {
                "url": "https://crab.example/hooks/telegram",
                "secret_token": "s3cret_-token",
            }
            header = telegram_webhook.SECRET_HEADER
            for given in ({}, {header: "s3cret_-tokem"}, {header: "s3cret_-token2"}):
                refused = await client.post("/hooks/telegram", json=update, headers=given)
                assert refused.status_code == 401
            bad = await client.post(
                "/hooks/telegram", content=b"{", headers={header: "s3cret_-token"}
            )
            assert bad.status_code == 400
            odd = {"update_id": 3, "message": "not a message"}
            malformed = await client.post(
                "/hooks/telegram", json=odd, headers={header: "s3cret_-token"}
            )
            assert malformed.status_code == 400
            wrong = await client.post("/hooks/telegram", content=b"{", headers={header: "x"})
            assert wrong.status_code == 401  # the secret is checked before the body is read
            for _ in range(2):  # Telegram retries: answered once
                taken = await client.post(
                    "/hooks/telegram", json=update, headers={header: "s3cret_-token"}
                )
                assert taken.status_code == 200
            [answer] = await fake.wait_for("sendMessage")
            assert not fake.of("getUpdates")
            fake.webhook = {}  # someone removed it on Telegram's side: it is set again
            await fake.wait_for("setWebhook", 2)
    assert answer.params["text"] == "via the webhook"
    assert answer.params["reply_parameters"]["message_id"] == 10
    told = session_messages(runtime.db, session_for("telegram", str(ALICE), aki.id), limit=5)
    assert [m.content for m in told] == ["hook", "via the webhook"]  # one turn


def test_webhook_mode_needs_its_url_and_a_well_formed_secret() -> None:
    with pytest.raises(ValidationError, match="needs webhook_url and webhook_secret"):
        TelegramConfig(enabled=True, mode="webhook")
    with pytest.raises(ValidationError, match="1-256 characters"):
        TelegramConfig(webhook_secret=SecretStr("has space"))
    with pytest.raises(ValidationError, match="not an http"):
        TelegramConfig(api_url="ftp://x")


async def test_a_missing_token_is_a_config_error(runtime: Runtime) -> None:  # noqa: F811
    for token in (None, SecretStr("${TELEGRAM_BOT_TOKEN}")):
        with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
            Telegram.from_config(runtime, TelegramConfig(enabled=True, token=token))
    assert Telegram.from_config(runtime, TelegramConfig()) is None


# ------------------------------------------------------------------ the link, limits
async def test_the_platform_down_then_back_retries_then_answers(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    scripted.outcomes.clear()
    scripted.then(reply("back again"))
    fake.down = True
    async with bot(runtime, fake, connected=False) as gateway:
        await until(lambda: gateway.connection.state.attempts >= 2)
        state = gateway.connection.state
        assert state.state == "retrying"
        assert state.error is not None
        assert fake.token not in state.error
        fake.down = False
        await until(lambda: gateway.connection.state.state == "connected")
        assert gateway.connection.state.attempts == 0
        fake.message("you there?", chat=fake.chat(ALICE), user=fake.user(ALICE, "alice"))
        await fake.wait_for("sendMessage")
    assert texts(fake) == ["back again"]


async def test_a_long_japanese_reply_is_split_on_sentence_ends_and_a_429_is_waited_out(
    runtime: Runtime,  # noqa: F811
    scripted: ScriptedProvider,  # noqa: F811
    fake: FakeTelegram,
    aki: Agent,
) -> None:
    long = "".join(f"これは{n}番目の文で、絵文字😀も入っています。" for n in range(400))
    assert utf16_len(long) > 2 * 4096
    scripted.outcomes.clear()
    scripted.then(reply(long))
    fake.limit_once("sendMessage", retry_after=1)
    async with bot(runtime, fake):
        fake.message("長く話して", chat=fake.chat(ALICE), user=fake.user(ALICE, "alice"))
        await until(lambda: "".join(texts(fake)) == long)
    pieces = texts(fake)
    assert len(pieces) == 3
    assert all(utf16_len(p) <= 4096 and p.endswith("。") for p in pieces)
    first, *rest = fake.of("sendMessage")
    assert "reply_parameters" in first.params
    assert all("reply_parameters" not in c.params for c in rest)


def _bot_message(chat: dict[str, Any]) -> dict[str, Any]:
    return {"message_id": 1, "date": 0, "chat": chat, "from": BOT, "text": "earlier"}
