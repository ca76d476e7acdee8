"""The LINE gateway end to end: webhooks signed the real way posted to the served app,
turns of a scripted model, and the answers sent through the real line-bot-sdk client to a
fake LINE platform on loopback (tests/fakes/line_platform.py). No network."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.actions.base import default_registry
from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings, load_settings
from opencrab.core.agent import Agent, AgentCreate, AgentStore
from opencrab.core.sessions import session_messages
from opencrab.core.tools import sync_tools, tool_id
from opencrab.core.workspace import Workspace
from opencrab.errors import ConfigError, NotFoundError
from opencrab.gateway.line import LineGateway
from opencrab.llm.router import LlmRouter
from opencrab.messages import MessageContent, MessageTarget, OutgoingMessage, session_for
from opencrab.schedules.service import create_schedule
from opencrab.schedules.spec import ScheduleInput
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.core.conftest import calls
from tests.fakes.line_platform import (
    SECRET,
    TOKEN,
    FakeLine,
    fake_line,
    group,
    image_event,
    postback_event,
    sign,
    text_event,
    user,
    webhook,
)
from tests.fakes.schedule_runs import run_to_its_end
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.local import LocalClient

ALLOWED = "U1111111111111111111111111111aaaa"
STRANGER = "U2222222222222222222222222222bbbb"
GROUP = "C3333333333333333333333333333cccc"
MEMBER = "U4444444444444444444444444444dddd"


def config(line: FakeLine) -> str:
    return f"""\
[gateway.line]
enabled = true
agent = "aki"
channel_secret = "${{LINE_CHANNEL_SECRET}}"
channel_access_token = "${{LINE_CHANNEL_ACCESS_TOKEN}}"
allow_users = ["{ALLOWED}"]
allow_channels = ["{GROUP}"]
api_url = "{line.api_url}"
data_url = "{line.data_url}"
retry_first_secs = 0.05
retry_cap_secs = 1.0
send_attempts = 10
"""


class Served:
    def __init__(
        self, client: TestClient, line: FakeLine, agent: Agent, settings: Settings, db: Database
    ) -> None:
        self.client, self.line, self.agent, self.settings, self.db = (
            client,
            line,
            agent,
            settings,
            db,
        )

    @property
    def gateway(self) -> LineGateway:
        gateway = self.client.app.state.runtime.outlets["line"]  # type: ignore[attr-defined]
        assert isinstance(gateway, LineGateway)
        return gateway

    def post(self, *events: dict[str, Any], signature: str | None = None) -> Any:
        body = webhook(*events)
        headers = {"Content-Type": "application/json"}
        headers["X-Line-Signature"] = sign(body) if signature is None else signature
        return self.client.post("/hooks/line", content=body, headers=headers)

    def said(self, conversation: str) -> list[tuple[str, str]]:
        session = session_for("line", conversation, self.agent.id)
        try:
            messages = session_messages(self.db, session, limit=50)
        except NotFoundError:  # no turn ever ran there
            return []
        return [(m.role, m.content) for m in messages]


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai")


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted: ScriptedProvider
) -> Iterator[Served]:
    monkeypatch.setenv("LINE_CHANNEL_SECRET", SECRET)
    monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", TOKEN)
    with fake_line() as line:
        file = tmp_path / "line.toml"
        file.write_text(config(line), encoding="utf-8")
        settings = load_settings(file)
        db = Database(settings.database_url)
        db.upgrade()
        sync_tools(db, default_registry())  # what opening the runtime does
        agent = AgentStore(db, settings).create(
            AgentCreate(name="aki", prompt="Be brief.", tool_ids=[tool_id("execute_command")])
        )
        save_tool_settings(
            db,
            agent.id,
            ToolSettings(execute_command=True, approvals={"execute_command": "always"}),
        )
        router = LlmRouter(settings)
        router.register_provider(scripted)
        # tokens required, as off loopback: LINE's webhook carries none, only its signature
        app = create_app(settings, db, router=router, gateways=True, auth=True)
        with LocalClient(app) as client:
            served = Served(client, line, agent, settings, db)
            line.wait(lambda: served.gateway.connection.state.state == "connected")
            yield served


def test_a_japanese_message_is_answered_with_its_reply_token(
    served: Served, scripted: ScriptedProvider
) -> None:
    line = served.line
    scripted.then(reply("こんにちは！今日は何をしましょうか。"))
    token = line.issue_token()
    response = served.post(text_event(user(ALLOWED), "こんにちは、カニさん", reply_token=token))
    assert (response.status_code, response.json()) == (200, {})
    line.wait(lambda: line.sent("reply"))
    [answer] = line.sent("reply")
    assert answer.body["replyToken"] == token
    assert answer.body["messages"] == [
        {"type": "text", "text": "こんにちは！今日は何をしましょうか。"}
    ]
    assert served.said(ALLOWED) == [
        ("user", "こんにちは、カニさん"),
        ("assistant", "こんにちは！今日は何をしましょうか。"),
    ]
    # the loading animation ran in the 1:1 chat while the turn did
    [loading] = [c for c in line.calls if c.path == "/v2/bot/chat/loading/start"]
    assert loading.body == {"chatId": ALLOWED, "loadingSeconds": 60}
    assert line.sent("push") == []


def test_a_group_answers_only_a_mention_and_nobody_unlisted_is_answered(
    served: Served, scripted: ScriptedProvider
) -> None:
    line = served.line
    scripted.then(reply("はい、どうぞ。"))
    served.post(
        text_event(group(GROUP, MEMBER), "ただの雑談です", reply_token=line.issue_token()),
        text_event(user(STRANGER), "Let me in", reply_token=line.issue_token()),
        text_event(
            group("C9999999999999999999999999999zzzz", MEMBER),
            "@Crab 他のグループ",
            reply_token=line.issue_token(),
            mentions=[{"index": 0, "length": 5, "type": "user", "isSelf": True}],
        ),
    )
    mention = [{"index": 0, "length": 5, "type": "user", "isSelf": True, "userId": "Ubot"}]
    token = line.issue_token()
    served.post(
        text_event(group(GROUP, MEMBER), "@Crab 質問です", reply_token=token, mentions=mention)
    )
    line.wait(lambda: line.sent("reply"))
    [answer] = line.sent("reply")
    assert answer.body["replyToken"] == token
    assert served.said(GROUP) == [("user", "質問です"), ("assistant", "はい、どうぞ。")]
    assert served.said(STRANGER) == []
    assert served.said("C9999999999999999999999999999zzzz") == []
    assert not [c for c in line.calls if c.path == "/v2/bot/chat/loading/start"]  # not in groups


def test_a_bad_signature_is_refused_and_nothing_is_kept(served: Served) -> None:
    line = served.line
    event = text_event(user(ALLOWED), "forged", reply_token=line.issue_token())
    refused = served.post(event, signature=sign(webhook(event), "another-secret"))
    assert refused.status_code == 401
    assert "X-Line-Signature" in refused.json()["message"]
    body = webhook(event)
    unsigned = served.client.post("/hooks/line", content=body)
    assert unsigned.status_code == 401
    tampered = body.replace(b"forged", b"FORGED")
    assert (
        served.client.post(
            "/hooks/line", content=tampered, headers={"X-Line-Signature": sign(body)}
        ).status_code
        == 401
    )
    not_json = b"{not json"
    bad = served.client.post(
        "/hooks/line", content=not_json, headers={"X-Line-Signature": sign(not_json)}
    )
    assert bad.status_code == 400
    assert served.said(ALLOWED) == []
    assert served.gateway.queue.empty()
    assert [c.path for c in line.calls if c.path != "/v2/bot/info"] == []


def test_a_redelivery_is_handled_once(served: Served, scripted: ScriptedProvider) -> None:
    line = served.line
    scripted.then(reply("一度だけ。"), reply("二つ目。"))
    event = text_event(user(ALLOWED), "一回目", reply_token=line.issue_token())
    assert served.post(event).status_code == 200
    again = {**event, "deliveryContext": {"isRedelivery": True}}
    assert served.post(again).status_code == 200
    served.post(text_event(user(ALLOWED), "二回目", reply_token=line.issue_token()))
    line.wait(lambda: len(line.sent("reply")) == 2)
    assert served.said(ALLOWED) == [
        ("user", "一回目"),
        ("assistant", "一度だけ。"),
        ("user", "二回目"),
        ("assistant", "二つ目。"),
    ]


def test_an_approval_button_decides_and_the_follow_up_is_pushed(
    served: Served, scripted: ScriptedProvider
) -> None:
    line = served.line
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    served.post(text_event(user(ALLOWED), "Run it", reply_token=line.issue_token()))
    line.wait(lambda: line.sent("reply"))
    [held] = line.sent("reply")
    items = held.body["messages"][-1]["quickReply"]["items"]
    assert [i["action"]["label"] for i in items] == ["Approve", "Deny"]
    approve = items[0]["action"]
    assert approve["type"] == "postback"
    runtime = served.client.app.state.runtime  # type: ignore[attr-defined]
    [pending] = runtime.approvals.list_approvals(status="pending")
    assert approve["data"] == f"ap:{pending.id}:y"
    token = line.issue_token()
    served.post(postback_event(user(ALLOWED), approve["data"], reply_token=token))
    line.wait(lambda: len(line.sent("reply")) == 2 and line.sent("push"))
    pressed = line.sent("reply")[1]
    assert pressed.body["replyToken"] == token
    assert pressed.body["messages"] == [{"type": "text", "text": "Approved: the call runs."}]
    [follow_up] = line.sent("push")
    assert follow_up.body["to"] == ALLOWED
    assert follow_up.body["messages"] == [{"type": "text", "text": "It printed made."}]
    assert follow_up.headers.get("x-line-retry-key")
    [decided] = runtime.approvals.list_approvals(status="approved")
    assert decided.decided_by == f"line:{ALLOWED}"


def test_an_image_lands_in_the_workspace_and_the_turn_names_it(
    served: Served, scripted: ScriptedProvider
) -> None:
    line = served.line
    photo = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8  # a JPEG's bytes
    line.contents["587000111"] = (photo, "image/jpeg")
    scripted.then(reply("いい写真ですね。"))
    served.post(image_event(user(ALLOWED), "587000111", reply_token=line.issue_token()))
    line.wait(lambda: line.sent("reply"))
    ws = Workspace.for_agent(served.settings, served.agent.id)
    assert ws.read_bytes("line/587000111.jpg") == photo
    [fetched] = [c for c in line.calls if "/content" in c.path]
    assert (fetched.host, fetched.path) == ("data", "/v2/bot/message/587000111/content")
    [(role, said), _] = served.said(ALLOWED)
    assert role == "user"
    assert "line/587000111.jpg" in said
    assert line.texts("reply") == ["いい写真ですね。"]

    # one over the workspace's quota is not kept, and the agent is told so
    served.settings.agent.max_workspace_size_mb = 1
    line.contents["587000222"] = (b"\xff" * (1024 * 1024 + 1), "image/jpeg")
    scripted.then(reply("容量がいっぱいです。"))
    served.post(image_event(user(ALLOWED), "587000222", reply_token=line.issue_token()))
    line.wait(lambda: len(line.sent("reply")) == 2)
    told = served.said(ALLOWED)[2]
    assert told == ("user", "(I could not keep the image you sent: quota_exceeded.)")
    assert [e.name for e in ws.list("line")] == ["587000111.jpg"]

    # one LINE no longer has (its content expired): the agent is told that too
    served.post(image_event(user(ALLOWED), "587000333", reply_token=line.issue_token()))
    line.wait(lambda: len(line.sent("reply")) == 3)
    told = served.said(ALLOWED)[4]
    assert told == ("user", "(I could not keep the image you sent: LINE answered HTTP 404.)")


def test_a_long_japanese_reply_is_split_at_full_stops_five_per_call(
    served: Served, scripted: ScriptedProvider
) -> None:
    line = served.line
    long = "今日は晴れです。明日は雨が降るかもしれません。" * 1100  # 25,300 characters
    scripted.then(reply(long))
    served.post(text_event(user(ALLOWED), "天気を長く教えて", reply_token=line.issue_token()))
    line.wait(lambda: line.sent("reply") and line.sent("push"))
    replied, pushed = line.texts("reply"), line.texts("push")
    assert len(replied) == 5  # a reply carries five message objects; the rest is pushed
    pieces = replied + pushed
    assert len(pieces) == 6
    assert all(len(p) <= 5000 and p.endswith("。") for p in pieces)
    assert "".join(pieces) == long


def test_the_platform_down_then_back(served: Served, scripted: ScriptedProvider) -> None:
    line, gateway = served.line, served.gateway
    scripted.then(reply("戻りました。"))
    line.down = True
    served.post(text_event(user(ALLOWED), "聞こえますか", reply_token=line.issue_token()))
    line.wait(lambda: gateway.connection.state.state == "retrying")
    assert gateway.connection.state.error is not None
    # the turn's answer: the reply refused (503), then pushes tried with backoff
    line.wait(lambda: any(c.path == "/v2/bot/message/push" for c in line.calls))
    assert not line.sent("reply")
    assert TOKEN not in json.dumps(gateway.connection.state.as_json())
    line.down = False
    line.wait(lambda: line.sent("push"))  # the reply token was refused meanwhile: pushed
    assert line.texts("push") == ["戻りました。"]
    line.wait(lambda: gateway.connection.state.state == "connected")
    assert served.client.get("/api/health").status_code == 200  # nothing else was held up


def test_an_outlet_message_is_pushed_with_the_inbox_buttons_once_through_429_and_lost_answers(
    served: Served,
) -> None:
    line, gateway = served.line, served.gateway
    line.throttle = 1
    notice = OutgoingMessage(
        content=MessageContent(text="承認待ちが1件あります。"),
        target=MessageTarget(gateway="line", channel_id=GROUP),
        metadata={"inbox": [{"kind": "approval", "subjectId": "a1b2", "summary": "run"}]},
    )
    portal = served.client.portal  # type: ignore[attr-defined]
    portal.call(gateway.send, notice)
    [pushed] = line.sent("push")
    assert pushed.body["to"] == GROUP
    [message] = pushed.body["messages"]
    assert message["text"] == "承認待ちが1件あります。"
    assert [i["action"]["data"] for i in message["quickReply"]["items"]] == [
        "ap:a1b2:y",
        "ap:a1b2:n",
    ]
    assert [c.path for c in line.calls].count("/v2/bot/message/push") == 2  # 429, then sent

    # a push LINE took but whose answer was lost: tried again under its key (409), sent once
    line.lose_answers = 1
    portal.call(gateway.send, notice.model_copy(update={"metadata": {}}))
    assert len(line.sent("push")) == 2
    assert line.sent("push")[1].body["messages"] == [
        {"type": "text", "text": "承認待ちが1件あります。"}
    ]


def test_a_post_schedule_is_pushed_to_a_line_group(
    served: Served, scripted: ScriptedProvider
) -> None:
    """A schedule's `post` (issue 37) names the LINE gateway and a group: its run's reply
    is pushed there through the running gateway, and the run records the group's session."""
    runtime = served.client.app.state.runtime  # type: ignore[attr-defined]
    given = ScheduleInput.model_validate(
        {
            "everySecs": 86_400,
            "action": {
                "kind": "post",
                "prompt": "今日の予定をまとめて",
                "home": {"gateway": "line", "channel": GROUP},
            },
        }
    )
    schedule = create_schedule(
        served.db, served.settings, served.agent.id, given, created_by="test"
    )
    scripted.then(reply("今日の予定はありません。"))
    portal = served.client.portal  # type: ignore[attr-defined]
    run = portal.call(run_to_its_end, runtime, schedule.id)
    assert (run.status, run.detail) == ("succeeded", "今日の予定はありません。"), run
    assert run.session_id == session_for("line", GROUP, served.agent.id)
    [pushed] = served.line.sent("push")
    assert pushed.body["to"] == GROUP
    assert served.line.texts("push") == ["今日の予定はありません。"]


def test_its_secrets_must_be_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", TOKEN)
    file = tmp_path / "line.toml"
    file.write_text(
        '[gateway.line]\nenabled = true\nchannel_access_token = "${LINE_CHANNEL_ACCESS_TOKEN}"\n',
        encoding="utf-8",
    )
    settings = load_settings(file)
    with pytest.raises(ConfigError, match=r"gateway\.line\.channel_secret is not set"):
        LineGateway(settings.gateway.tables["line"], runtime=None)  # type: ignore[arg-type]
    bad = tmp_path / "bad.toml"
    bad.write_text('[gateway.line]\napi_url = "https://api.line.me/x?y"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"gateway\.line\.api_url"):
        load_settings(bad)


def test_it_needs_the_http_server_and_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Database
) -> None:
    from opencrab.gateway.builtins import Line

    monkeypatch.setenv("LINE_CHANNEL_SECRET", SECRET)
    monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", TOKEN)
    file = tmp_path / "line.toml"
    file.write_text(
        "[gateway.rest]\nenabled = false\n\n[gateway.line]\nenabled = true\n"
        'channel_secret = "${LINE_CHANNEL_SECRET}"\n'
        'channel_access_token = "${LINE_CHANNEL_ACCESS_TOKEN}"\n',
        encoding="utf-8",
    )
    headless = load_settings(file)
    runtime = type("R", (), {"settings": headless})()
    with pytest.raises(ConfigError, match=r"webhook arrives over HTTP"):
        Line.from_config(runtime, headless.gateway.tables["line"])
    served = load_settings(overrides={"gateway": {"line": {"enabled": True}}})
    served_runtime = type("R", (), {"settings": served})()
    monkeypatch.setitem(sys.modules, "linebot.v3.messaging", None)  # not installed
    with pytest.raises(ConfigError, match=r"pip install 'opencrab\[line\]'"):
        Line.from_config(served_runtime, served.gateway.tables["line"])


def test_without_a_running_gateway_the_webhook_is_unavailable(
    settings: Settings, db: Database
) -> None:
    with LocalClient(create_app(settings, db)) as client:
        body = webhook()
        answer = client.post("/hooks/line", content=body, headers={"X-Line-Signature": sign(body)})
    assert answer.status_code == 503
    assert answer.json()["error"] == "unavailable"


def test_the_bots_mention_is_cut_out_counting_utf16_and_others_stay() -> None:
    from types import SimpleNamespace as Mentionee

    from opencrab.gateway.line import _without_mentions

    text = "😀 @Crab 明日の予定は？ @Mina"  # the emoji is two UTF-16 units
    me = Mentionee(index=3, length=5, is_self=True)
    mina = Mentionee(index=text.index("@Mina") + 1, length=5, is_self=False)
    assert _without_mentions(text, [mina, me]) == "😀  明日の予定は？ @Mina"


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("報告書.pdf", "42-報告書.pdf"),
        ("../../etc/passwd", "42-passwd"),
        ("..\\..\\boot.ini", "42-boot.ini"),
        ("a\x00b; rm -rf ~.txt", "42-a_b_rm_-rf_.txt"),
        ("...", "42-file"),
    ],
)
def test_a_files_name_is_made_safe_for_the_workspace(given: str, stored: str) -> None:
    from types import SimpleNamespace as Content

    from opencrab.gateway.line import _file_name

    assert _file_name(Content(id="42", file_name=given)) == stored
    assert _file_name(Content(id="42")) == "42.jpg"
