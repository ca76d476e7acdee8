"""A chat's held tool call in Chromium: the session view lists it with Approve / Deny (the
feed's row says "waiting", not "running"); approving from the page runs the call and the
chat continues with its result (the fake model receives it, its answer is stored); a
denial from the page reaches the model as the call's error result."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from playwright.sync_api import expect

from opencrab.core.tools import tool_id
from tests.dashboard.conftest import CHAT, QUIET, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import call, chunk, completion, tool_delta, tool_reply

COMMAND = {"command": "echo できた"}
ANSWER = "コマンドは「できた」と出力しました。"


def held_chat(api: httpx.Client, llm: FakeLlmServer, name: str) -> tuple[str, dict[str, Any]]:
    """A chat over REST whose execute_command call waits (policy "always"), the model's
    answer after it queued; (session id, the TurnOutcome)."""
    agent = make_agent(
        api, name, language="ja", heartbeat=QUIET, toolIds=[tool_id("execute_command")]
    )
    settings = {"executeCommand": True, "approvals": {"execute_command": "always"}}
    assert api.put(f"/api/agents/{agent['id']}/tool-settings", json=settings).status_code == 200
    llm.reset()
    llm.reply(
        CHAT,
        tool_reply(call("call_1", "execute_command", COMMAND)),
        Reply(json=completion({"content": ANSWER})),
    )
    session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    posted = api.post(f"/api/sessions/{session}/messages", json={"content": "実行して"})
    assert posted.status_code == 201, posted.text
    turn: dict[str, Any] = posted.json()["turn"]
    assert turn["stoppedBy"] == "approval"
    return session, turn


def answered(api: httpx.Client, session: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 90
    while True:
        messages: list[dict[str, Any]] = api.get(f"/api/sessions/{session}/messages").json()
        if messages[-1]["role"] == "assistant":
            return messages
        assert time.monotonic() < deadline, f"the chat did not continue: {messages}"
        time.sleep(0.2)


def tool_results(llm: FakeLlmServer) -> list[dict[str, Any]]:
    """The tool messages the model was sent in its second call."""
    sent = llm.requests_to(CHAT)
    assert len(sent) >= 2, "the model was not called again"
    return [m for m in sent[1].json["messages"] if m["role"] == "tool"]


def test_a_held_chat_call_is_approved_from_the_session_view_and_the_chat_continues(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    session, turn = held_chat(api, llm, "実行係")
    page.page.goto(f"/sessions/{session}")
    panel = page.page.locator("[data-approvals]")
    expect(panel.locator("[data-approval-tool]")).to_have_text("execute_command")
    expect(panel.locator("[data-approval-arguments]")).to_contain_text("echo できた")
    row = page.page.locator(".ev-action").filter(has_text="execute_command")
    expect(row.locator(".ev-state")).to_have_text("waiting")
    shoot(page.page, "session-approval")

    panel.get_by_role("button", name="Approve and run").click()
    messages = answered(api, session)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "実行して"),
        ("assistant", ANSWER),
    ]
    [result] = tool_results(llm)
    assert "できた" in json.dumps(result, ensure_ascii=False)
    assert api.get(f"/api/approvals/{turn['approvalId']}").json()["status"] == "approved"
    page.page.wait_for_load_state()  # the button reloads the page once decided
    page.page.goto(f"/sessions/{session}")
    expect(page.page.locator("[data-approvals]")).to_have_count(0)
    expect(row.locator(".ev-state")).to_have_text("ok")
    expect(page.page.locator(".ev").filter(has_text=ANSWER).first).to_be_visible()


def test_a_held_chat_call_denied_from_the_session_view_reaches_the_model_as_a_denial(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    session, turn = held_chat(api, llm, "拒否係")
    page.page.goto(f"/sessions/{session}")
    page.page.get_by_label("Reason for a denial (optional)").fill("今は不要です")
    page.page.get_by_role("button", name="Deny").click()
    answered(api, session)
    [result] = tool_results(llm)
    assert "denied by a person: 今は不要です" in json.dumps(result, ensure_ascii=False)
    decided = api.get(f"/api/approvals/{turn['approvalId']}").json()
    assert (decided["status"], decided["reason"]) == ("denied", "今は不要です")


def test_a_held_call_is_approved_on_the_chat_page_and_the_answer_follows_there(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    agent = make_agent(
        api, "チャット係", language="ja", heartbeat=QUIET, toolIds=[tool_id("execute_command")]
    )
    settings = {"executeCommand": True, "approvals": {"execute_command": "always"}}
    assert api.put(f"/api/agents/{agent['id']}/tool-settings", json=settings).status_code == 200
    llm.reset()
    held_call = [
        chunk(tool_delta(0, "", call_id="call_c", name="execute_command")),
        chunk(tool_delta(0, json.dumps(COMMAND, ensure_ascii=False))),
        chunk({}, finish="tool_calls"),
        "[DONE]",
    ]
    # the chat streams; the turn that continues after the decision does not
    llm.reply(CHAT, Reply(sse=held_call), Reply(json=completion({"content": ANSWER})))
    page.page.goto("/agents/チャット係/chat")
    page.page.get_by_label("Message to チャット係").fill("実行して")
    page.page.get_by_role("button", name="Send").click()
    waiting = page.page.get_by_role("group", name="Waiting for your approval")
    expect(waiting).to_contain_text("execute_command waits for your approval.")
    expect(waiting.locator("pre")).to_contain_text("echo できた")
    shoot(page.page, "chat-approval")

    waiting.get_by_role("button", name="Approve and run").click()
    expect(page.page.locator(".msg.agent .msg-text").last).to_have_text(ANSWER, timeout=60_000)
    assert "できた" in json.dumps(tool_results(llm), ensure_ascii=False)
