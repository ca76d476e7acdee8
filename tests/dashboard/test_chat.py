"""The chat page: a message sent over /api/ws, the reply streamed into the transcript."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import httpx
from playwright.sync_api import WebSocket, expect

from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import chunk, completion, tool_delta

QUIET = {"enabled": False}  # no heartbeat turn takes a scripted reply meant for the chat
USAGE = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}


def streamed(*pieces: str) -> list[Any]:
    """A plain-text reply as OpenAI streams it, one chunk per piece."""
    first, *rest = pieces
    return [
        chunk({"role": "assistant", "content": first}),
        *(chunk({"content": piece}) for piece in rest),
        chunk({}, finish="stop"),
        chunk(usage=USAGE),
        "[DONE]",
    ]


def tokens_seen(frames: list[str]) -> list[str]:
    return [m["text"] for m in map(json.loads, frames) if m.get("type") == "token"]


def test_a_message_gets_a_streamed_reply(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "アキ", language="ja", description="質問に答える", heartbeat=QUIET)
    gate = threading.Event()
    fake_llm_server.reply(
        CHAT,
        Reply(
            sse=streamed("こんにちは", "、アキ", "です。", "よろしく！"), gate=gate, gate_after=2
        ),
    )
    frames: list[str] = []

    def watch(ws: WebSocket) -> None:
        ws.on("framereceived", lambda payload: frames.append(str(payload)))

    page.page.on("websocket", watch)
    page.page.goto("/agents/アキ/chat")
    expect(page.page.get_by_role("link", name="Chat", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    box = page.page.get_by_label("Message to アキ")
    box.fill("はじめまして")
    box.press("Enter")
    transcript = page.page.get_by_role("log", name="Messages")
    expect(transcript.locator(".msg.user .msg-text")).to_have_text("はじめまして")
    reply = transcript.locator(".msg.agent .msg-text")
    try:
        # the model holds its stream after two chunks: they are on the page already
        expect(reply).to_have_text("こんにちは、アキ")
        expect(transcript.locator(".msg.agent")).to_have_class(re.compile("streaming"))
        shoot(page.page, "chat-streaming")
    finally:
        gate.set()
    expect(reply).to_have_text("こんにちは、アキです。よろしく！")
    expect(transcript.locator(".msg.agent")).not_to_have_class(re.compile("streaming"))
    assert tokens_seen(frames) == ["こんにちは", "、アキ", "です。", "よろしく！"]
    expect(box).to_be_focused()

    expect(page.page).to_have_url(re.compile(r"\?session=[0-9a-f-]{36}$"))
    session = page.page.url.rsplit("=", 1)[1]
    current = page.page.locator(".chat-sessions [aria-current=page]")
    expect(current).to_have_attribute("href", f"/agents/%E3%82%A2%E3%82%AD/chat?session={session}")
    stored = api.get(f"/api/sessions/{session}/messages").json()
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "はじめまして"),
        ("assistant", "こんにちは、アキです。よろしく！"),
    ]

    # the same session goes on: the next message is sent into it
    fake_llm_server.reset()
    fake_llm_server.reply(CHAT, Reply(sse=streamed("また", "どうぞ。")))
    box.fill("ありがとう")
    page.page.get_by_role("button", name="Send").click()
    expect(reply.nth(1)).to_have_text("またどうぞ。")
    assert len(api.get(f"/api/sessions/{session}/messages").json()) == 4


def test_inner_voice_and_actions_are_shown_compactly(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "ハル", language="ja", heartbeat=QUIET)
    thinking = [
        chunk({"role": "assistant", "content": "メモを残して"}),
        chunk({"content": "から答えます。"}),
        chunk(tool_delta(0, "", call_id="call_a", name="generate_inner_voice")),
        chunk(tool_delta(0, json.dumps({"content": "丁寧に答えよう"}, ensure_ascii=False))),
        chunk(tool_delta(1, "", call_id="call_b", name="ws_write")),
        chunk(tool_delta(1, json.dumps({"path": "メモ.md", "content": "会議は木曜"}))),
        chunk({}, finish="tool_calls"),
        chunk(usage=USAGE),
        "[DONE]",
    ]
    fake_llm_server.reply(CHAT, Reply(sse=thinking), Reply(sse=streamed("メモに", "書きました。")))
    page.page.goto("/agents/ハル/chat")
    page.page.get_by_label("Message to ハル").fill("会議の予定をメモして")
    page.page.get_by_role("button", name="Send").click()
    agent = page.page.locator(".msg.agent")
    expect(agent.locator(".msg-text")).to_have_text("メモに書きました。")
    expect(agent.locator(".thought")).to_have_text(
        ["inner voiceメモを残してから答えます。", "inner voice丁寧に答えよう"]
    )
    action = agent.locator("details.action")
    expect(action).to_have_count(1)
    expect(action.locator("summary")).to_contain_text("ws_write ✓")
    action.locator("summary").click()
    expect(action.locator("pre").first).to_contain_text('"path": "メモ.md"')
    shoot(page.page, "chat-inner-voice")
    files = api.get("/api/agents/ハル/workspace").json()
    assert "メモ.md" in json.dumps(files, ensure_ascii=False)


def test_a_session_opens_with_its_history_and_new_chat_starts_afresh(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "ナツ", language="ja", heartbeat=QUIET)
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "夏は海が好きです。"})))
    session = api.post("/api/sessions", json={"agentId": "ナツ"}).json()["id"]
    api.post(f"/api/sessions/{session}/messages", json={"content": "好きな季節は？"})

    html = api.get(f"/agents/ナツ/chat?session={session}").text  # rendered by the server
    assert "好きな季節は？" in html
    assert "夏は海が好きです。" in html

    page.page.goto(f"/agents/ナツ/chat?session={session}")
    transcript = page.page.get_by_role("log", name="Messages")
    expect(transcript.locator(".msg")).to_have_count(2)
    expect(transcript.locator(".msg.user .msg-text")).to_have_text("好きな季節は？")
    expect(transcript.locator(".msg.agent .msg-text")).to_have_text("夏は海が好きです。")
    expect(page.page.locator(".chat-sessions [aria-current=page]")).to_have_count(1)
    shoot(page.page, "chat-history")

    page.page.get_by_role("link", name="New chat").click()
    expect(page.page).to_have_url(re.compile(r"/chat$"))
    expect(transcript.locator(".msg")).to_have_count(0)
    expect(page.page.get_by_text("Say something to ナツ.")).to_be_visible()


def test_a_session_of_another_agent_or_no_session_is_a_404_page(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "フユ", heartbeat=QUIET)
    make_agent(api, "アキラ", heartbeat=QUIET)
    theirs = api.post("/api/sessions", json={"agentId": "アキラ"}).json()["id"]
    page.allow("/chat?session=")
    response = page.page.goto(f"/agents/フユ/chat?session={theirs}")
    assert response is not None
    assert response.status == 404
    expect(page.page.get_by_text(f"フユ has no chat session {theirs}")).to_be_visible()
    response = page.page.goto("/agents/フユ/chat?session=not-a-uuid")
    assert response is not None
    assert response.status == 400
    assert api.get("/agents/フユ/chat?bogus=1").status_code == 400  # undeclared parameter


def test_a_failed_turn_shows_the_reason(page: Watched, api: httpx.Client) -> None:
    make_agent(api, "リン", llm={"dailyBudgetUsd": 0}, heartbeat=QUIET)
    page.page.goto("/agents/リン/chat")
    page.page.get_by_label("Message to リン").fill("こんにちは")
    page.page.get_by_role("button", name="Send").click()
    alert = page.page.locator(".msg.agent").get_by_role("alert")
    expect(alert).to_contain_text("daily budget")
    expect(page.page.locator(".msg.agent .msg-text")).to_have_count(0)
    expect(page.page.get_by_role("button", name="Send")).not_to_have_attribute("aria-busy", "true")


def test_a_budget_refusal_names_the_cap_as_set_and_where_to_raise_it(
    page: Watched, api: httpx.Client
) -> None:
    make_agent(api, "ケイ", heartbeat=QUIET)
    p = page.page
    p.goto("/budgets")
    caps = p.locator("details.agent-cap", has=p.locator("summary", has_text="ケイ"))
    if caps.get_attribute("open") is None:  # (open already when it is the only agent)
        caps.locator("summary").click()
    mine = p.get_by_role("form", name="Caps of ケイ")
    mine.get_by_label("Daily cap (USD)").fill("0.005")  # less than one call may cost
    mine.get_by_role("button", name="Save").click()
    expect(p.locator('tr[data-agent="ケイ"] td').nth(1)).to_have_text("$0.0050")

    p.goto("/agents/ケイ/chat")
    p.get_by_label("Message to ケイ").fill("こんにちは")
    p.get_by_role("button", name="Send").click()
    alert = p.locator(".msg.agent").get_by_role("alert")
    expect(alert).to_contain_text("agent ケイ's $0.005 daily budget cannot take this call")
    expect(alert).to_contain_text("on the Budgets page (/budgets)")
    shoot(p, "chat-budget-refusal")


def test_a_pasted_message_over_the_limit_is_refused_saying_so_not_cut(
    page: Watched, api: httpx.Client
) -> None:
    make_agent(api, "ソラ", heartbeat=QUIET)
    p = page.page
    p.goto("/agents/ソラ/chat")
    box = p.get_by_label("Message to ソラ")
    pasted = "長" * 100_001  # MAX_MESSAGE_CHARS + 1
    box.fill(pasted)
    assert len(box.input_value()) == 100_001  # nothing was cut
    error = p.locator("[data-chat-error]")
    expect(error).to_have_text(
        "This message is 100,001 characters; the limit is 100,000. "
        "Shorten it to send it (nothing was cut)."
    )
    p.get_by_role("button", name="Send").click()
    expect(error).to_be_visible()
    expect(p.locator(".msg.user")).to_have_count(0)  # nothing sent
    assert len(box.input_value()) == 100_001
    box.press("End")
    box.press("Backspace")
    expect(error).to_be_hidden()
    expect(box).to_have_attribute("aria-invalid", "false")
