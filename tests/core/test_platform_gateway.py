"""What the chat-platform gateways share (opencrab.gateway.platform): splitting at the
platform's limit on sentence boundaries, allow-lists that answer nobody until allowed, an
agent per channel, a link kept up with backoff, and approval buttons that decide."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any, ClassVar

import pytest

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.core.tools import tool_id
from opencrab.gateway.platform import (
    Button,
    Connection,
    PlatformConfig,
    buttons_for,
    press,
    question_of,
    split_text,
)
from opencrab.gateway.serve import ChatGateway, GatewayRunner, SenderRate
from opencrab.messages import (
    ChatSource,
    IncomingMessage,
    MessageContent,
    MessageTarget,
    OutgoingMessage,
    Sender,
    session_for,
)
from tests.core.conftest import calls
from tests.fakes.scripted_provider import ScriptedProvider, reply


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# ------------------------------------------------------------------ splitting
def test_a_long_english_reply_is_cut_at_sentence_ends_within_the_limit() -> None:
    sentences = [f"Sentence number {n} says something short." for n in range(40)]
    text = " ".join(sentences)
    pieces = split_text(text, 200)
    assert all(len(p) <= 200 for p in pieces)
    assert all(p.endswith(".") for p in pieces)  # every cut fell after a sentence
    assert " ".join(pieces) == text


def test_japanese_is_cut_after_its_full_stops_without_spaces() -> None:
    text = "今日は晴れです。" * 30 + "明日は雨でしょうか？" * 10
    pieces = split_text(text, 50)
    assert all(len(p) <= 50 for p in pieces)
    assert all(p[-1] in "。？" for p in pieces)
    assert "".join(pieces) == text


def test_paragraphs_and_lines_come_before_sentences_and_a_word_is_cut_only_when_needed() -> None:
    text = "First part. It goes on.\n\nSecond part is here. And more."
    assert split_text(text, 40) == ["First part. It goes on.", "Second part is here. And more."]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_the_limit_counts_as_the_platform_counts() -> None:
    text = "😀" * 30  # two UTF-16 units each
    pieces = split_text(text, 11, measure=utf16)
    assert all(utf16(p) <= 11 for p in pieces)
    assert "".join(pieces) == text
    assert split_text("  \n ", 10) == []
    with pytest.raises(ValueError, match="at least one unit"):
        split_text("x", 0)


# ------------------------------------------------------------------ allow-lists
def test_nobody_is_answered_until_allowed() -> None:
    assert not PlatformConfig().allows("u1", "c1")
    assert PlatformConfig(allow_users=["u1"]).allows("u1", "c9")
    assert not PlatformConfig(allow_users=["u1"]).allows("u2", "c9")
    assert PlatformConfig(allow_channels=["c1"]).allows("u2", "c1")
    assert PlatformConfig(allow_users=["*"]).allows("anyone", "anywhere")
    bound = PlatformConfig(agent="aki", channel_agents={"c2": "kai"})
    assert (bound.agent_of("c1"), bound.agent_of("c2")) == ("aki", "kai")


# ------------------------------------------------------------------ the link
async def test_a_link_that_fails_retries_with_backoff_and_shows_its_state() -> None:
    attempts: list[float] = []
    up = asyncio.Event()
    link: Connection

    async def session() -> None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 3:
            raise ConnectionError("platform down (token xoxb-SECRET)")
        link.mark_connected()
        up.set()
        await asyncio.Event().wait()  # serves until cancelled

    link = Connection(
        "room", session, first=0.05, cap=0.2, scrub=lambda t: t.replace("xoxb-SECRET", "***")
    )
    link.start()
    async with asyncio.timeout(30):
        await up.wait()
    assert link.state.state == "connected"
    assert link.state.attempts == 0
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps[0] >= 0.05
    assert gaps[1] >= 0.1
    await link.stop()
    assert link.state.state == "stopped"


async def test_a_failing_link_says_why_without_its_secret() -> None:
    async def session() -> None:
        raise ConnectionError("refused with token xoxb-SECRET")

    link = Connection(
        "room", session, first=0.02, cap=0.05, scrub=lambda t: t.replace("xoxb-SECRET", "***")
    )
    link.start()
    async with asyncio.timeout(30):
        while link.state.attempts < 3:
            await asyncio.sleep(0.01)
    assert link.state.state == "retrying"
    assert link.state.error == "ConnectionError: refused with token ***"
    assert link.state.retry_in is not None
    assert link.state.retry_in <= 0.05
    await link.stop()


# ------------------------------------------------------------------ a gateway using them
class Room(ChatGateway):
    """A platform gateway in memory: posts arrive in `inbox`, replies land in `sent`."""

    name: ClassVar[str] = "room"
    config_model = PlatformConfig

    def __init__(self, config: PlatformConfig) -> None:
        super().__init__(config)
        self.settings = config
        self.inbox: asyncio.Queue[IncomingMessage] = asyncio.Queue()
        self.sent: list[OutgoingMessage] = []

    async def connect(self) -> None: ...

    async def disconnect(self) -> None: ...

    async def receive(self) -> IncomingMessage:
        return await self.inbox.get()

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)

    def agent(self) -> str | None:
        return self.settings.agent

    def agent_for_message(self, message: IncomingMessage) -> str | None:
        assert isinstance(message.source, ChatSource)
        return self.settings.agent_of(message.source.conversation)

    def post(self, text: str, channel: str) -> None:
        source = ChatSource(gateway=self.name, conversation=channel)
        self.inbox.put_nowait(IncomingMessage.text(text, source=source, sender=Sender(id="u1")))

    async def replies(self, count: int) -> list[OutgoingMessage]:
        async with asyncio.timeout(60):
            while len(self.sent) < count:
                await asyncio.sleep(0.02)
        return self.sent


async def test_a_channel_bound_to_its_own_agent_talks_to_that_agent(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    aki = runtime.agents.create(AgentCreate(name="aki", prompt="You keep notes."))
    kai = runtime.agents.create(AgentCreate(name="kai", prompt="You run things."))
    room = Room(PlatformConfig(enabled=True, agent="aki", channel_agents={"ops": "kai"}))
    scripted.outcomes.clear()
    scripted.then(reply("from the default"), reply("from the bound one"))
    running = asyncio.create_task(GatewayRunner(room, runtime, aki).run())
    try:
        room.post("hello", "general")
        await room.replies(1)
        room.post("hello", "ops")
        sent = await room.replies(2)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert [m.content.text for m in sent] == ["from the default", "from the bound one"]
    for channel, who, said in (
        ("general", aki, "from the default"),
        ("ops", kai, "from the bound one"),
    ):
        messages = session_messages(runtime.db, session_for("room", channel, who.id), limit=10)
        assert [(m.role, m.content) for m in messages] == [("user", "hello"), ("assistant", said)]


async def test_a_held_call_offers_buttons_and_pressing_one_decides_it(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(
        AgentCreate(name="kai", prompt="You run things.", tool_ids=[tool_id("execute_command")])
    )
    save_tool_settings(
        runtime.db,
        agent.id,
        ToolSettings(execute_command=True, approvals={"execute_command": "always"}),
    )
    room = Room(PlatformConfig(enabled=True, agent="kai"))
    scripted.outcomes.clear()
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    running = asyncio.create_task(GatewayRunner(room, runtime, agent).run())
    runtime.approvals.follow_ups.start()
    try:
        room.post("Run it", "ops")
        [held] = await room.replies(1)
        [pending] = runtime.approvals.list_approvals(status="pending")
        approve, deny = buttons_for(held)
        assert (approve, deny) == (
            Button("Approve", f"ap:{pending.id}:y"),
            Button("Deny", f"ap:{pending.id}:n"),
        )
        assert len(approve.id.encode()) <= 64  # fits Telegram's callback data
        assert await press(runtime, approve.id, by="sam") == "Approved: the call runs."
        sent = await room.replies(2)
        assert sent[1].content.text == "It printed made."
        assert buttons_for(sent[1]) == []
        assert (await press(runtime, deny.id, by="sam")).startswith("Not done:")
        assert await press(runtime, "ap:zz", by="sam") == "That button is not one of mine."
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    [decided] = runtime.approvals.list_approvals(status="approved")
    assert decided.decided_by == "sam"


def test_an_inbox_notice_offers_buttons_for_each_approval_and_question_when_asked() -> None:
    session = "0b7e8f3c-1d2a-4c5b-9e6f-7a8b9c0d1e2f"
    items: list[dict[str, Any]] = [
        {"kind": "approval", "subjectId": "a1", "summary": "x"},
        {"kind": "ticket_question", "subjectId": session, "summary": "y"},
        {"kind": "approval", "subjectId": "a2", "summary": "z"},
        {"kind": "ticket_question", "subjectId": "not-a-session", "summary": "w"},
    ]
    notice = OutgoingMessage(
        content=MessageContent(text="waiting"),
        target=MessageTarget(gateway="room", channel_id="alerts"),
        metadata={"inbox": items},
    )
    assert [c.id for c in buttons_for(notice)] == ["ap:a1:y", "ap:a1:n", "ap:a2:y", "ap:a2:n"]
    assert [c.label for c in buttons_for(notice)][:2] == ["Approve #1", "Deny #1"]
    # a gateway that can take an answer also offers one Answer button per question
    answer = buttons_for(notice, questions=True)[-1]
    assert answer == Button("Answer question", f"tq:{session}")
    assert len(answer.id.encode()) <= 64  # fits Telegram's callback data
    assert question_of(answer.id) == session
    assert question_of("ap:a1:y") is None
    assert question_of("tq:not-a-session-but-36-characters-xx") is None


# ------------------------------------------------------------------ the rate rule
def test_a_sender_over_the_rate_is_told_once_and_the_others_go_on() -> None:
    now = [0.0]
    rate = SenderRate(3, clock=lambda: now[0])

    def said(user: str, channel: str = "c") -> IncomingMessage:
        source = ChatSource(gateway="room", conversation=channel)
        return IncomingMessage.text("hi", source=source, sender=Sender(id=user))

    assert [rate.refusal(said("u1")) for _ in range(3)] == [None, None, None]
    told = rate.refusal(said("u1"))
    assert told is not None
    assert "at most 3 messages a minute" in told
    assert rate.refusal(said("u1")) == ""  # told once: a flood is not echoed
    assert rate.refusal(said("u2")) is None  # another sender
    assert rate.refusal(said("u1", "other")) is None  # another conversation
    now[0] = 60.0
    assert rate.refusal(said("u1")) is None  # a minute later
    assert SenderRate(None).refusal(said("u1")) is None


async def test_the_runner_applies_the_rate_and_tells_the_gateway_each_message_is_done(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    aki = runtime.agents.create(AgentCreate(name="aki", prompt="You keep notes."))
    room = Room(PlatformConfig(enabled=True, agent="aki", messages_per_minute=1))
    done: list[str] = []
    room.finished = lambda message: done.append(message.content.text)  # type: ignore[method-assign]
    scripted.outcomes.clear()
    scripted.then(reply("first answer"))
    running = asyncio.create_task(GatewayRunner(room, runtime, aki).run())
    try:
        room.post("one", "general")
        await room.replies(1)
        room.post("two", "general")
        sent = await room.replies(2)
        async with asyncio.timeout(30):
            while len(done) < 2:
                await asyncio.sleep(0.02)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert sent[0].content.text == "first answer"
    assert sent[1].content.text.startswith("Slow down: at most 1 message a minute")
    assert done == ["one", "two"]
    assert len(scripted.requests) == 1  # the second ran no turn
