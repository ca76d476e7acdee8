"""Sessions: the list and its filters, a live session while its turn runs, the operator's
message, reconnecting, and a discussion started from the form and watched live."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

THINKING = "ファイルを確認してから答えよう。"
ANSWER = "ワークスペースはまだ空っぽです。何か書きましょうか？"


def tool_reply(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> Reply:
    """A model reply calling actions (OpenAI's wire format)."""
    tool_calls = [
        {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
        }
        for n, (name, args) in enumerate(calls)
    ]
    message = {"content": text, "tool_calls": tool_calls}
    usage = {"prompt_tokens": 1200, "completion_tokens": 35, "total_tokens": 1235}
    return Reply(json=completion(message, finish="tool_calls", usage=usage))


def text_reply(text: str, gate: threading.Event | None = None) -> Reply:
    return Reply(json=completion({"content": text}), gate=gate)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a model reply until the test sets it (never left holding)."""
    event = threading.Event()
    yield event
    event.set()


def quiet_agent(api: httpx.Client, name: str, **fields: Any) -> dict[str, Any]:
    """An agent whose heartbeat is off: only the test's own turns ask the fake model."""
    return make_agent(api, name, heartbeat={"enabled": False}, **fields)


def thinking_agent(api: httpx.Client, name: str) -> dict[str, Any]:
    """An agent (Japanese) that may think out loud: granted generate_inner_voice."""
    tools = {t["name"]: t["id"] for t in api.get("/api/tools").json()}
    return quiet_agent(
        api, name, language="ja", description="考える係", toolIds=[tools["generate_inner_voice"]]
    )


def new_chat(api: httpx.Client, agent: str) -> str:
    created = api.post("/api/sessions", json={"agentId": agent})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def rows_of(page: Page) -> list[tuple[str, str]]:
    """Each row of the feed, details open: its class and the text a reader sees."""
    page.eval_on_selector_all("#feed details", "els => els.forEach(d => { d.open = true; })")
    found: list[list[str]] = page.eval_on_selector_all(
        "#feed > li",
        "els => els.map(el => [el.className, el.innerText.replace(/\\s+/g, ' ').trim()])",
    )
    return [(c, t) for c, t in found]


def row(page: Page, kind: str, text: str) -> Locator:
    return page.locator(f"#feed > li.ev-{kind}").filter(has_text=text)


def wait_until_ended(api: httpx.Client, discussion_id: str) -> None:
    for _ in range(600):
        if api.get(f"/api/discussions/{discussion_id}").json()["status"] == "completed":
            return
        threading.Event().wait(0.1)
    raise AssertionError(f"discussion {discussion_id} did not end")


def wait_for_live(page: Page) -> None:
    expect(page.locator("[data-live-state]")).to_have_text("live")


# --------------------------------------------------------------------------- the list
def test_the_list_filters_by_kind_agent_status_and_title_and_pages(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    hanako = quiet_agent(api, "ハナコ", language="ja")
    quiet_agent(api, "ben")
    weekend = new_chat(api, hanako["id"])
    said = api.post(f"/api/sessions/{weekend}/messages", json={"content": "週末の予定を相談したい"})
    assert said.status_code == 201, said.text
    release = new_chat(api, "ben")
    api.post(f"/api/sessions/{release}/messages", json={"content": "Plan the release notes"})
    talk = api.post(
        "/api/discussions",
        json={
            "theme": "週休3日制について話し合う",
            "participants": ["ハナコ", "ben"],
            "maxTurns": 2,
        },
    ).json()["id"]
    for _ in range(52):  # enough empty chats for a second page
        new_chat(api, "ben")

    p = page.page
    p.goto("/sessions")
    expect(p.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
    expect(p.locator("tbody tr")).to_have_count(50)
    p.get_by_role("link", name="Older →").click()
    expect(p).to_have_url(re.compile(r"/sessions\?page=2$"))
    expect(p.locator("tbody tr")).to_have_count(5)
    expect(p.get_by_role("link", name="週末の予定を相談したい")).to_be_visible()

    p.get_by_label("Kind").select_option("discussion")
    p.get_by_role("button", name="Filter").click()
    expect(p).to_have_url(re.compile(r"kind=discussion"))
    expect(p.locator("tbody tr")).to_have_count(1)
    expect(p.get_by_role("link", name="週休3日制について話し合う")).to_have_attribute(
        "href", f"/sessions/{talk}"
    )

    p.get_by_label("Kind").select_option("")
    p.get_by_label("Title contains").fill("週末")
    p.get_by_role("button", name="Filter").click()
    expect(p.locator("tbody tr")).to_have_count(1)
    expect(p.locator("tbody tr")).to_contain_text("ハナコ")

    p.get_by_label("Title contains").fill("")
    p.get_by_label("Agent").select_option("ハナコ")
    p.get_by_role("button", name="Filter").click()
    expect(p.locator("tbody tr")).to_have_count(2)  # its chat and the discussion it is in
    wait_until_ended(api, talk)
    p.get_by_label("Status").select_option("completed")
    p.get_by_role("button", name="Filter").click()
    expect(p).to_have_url(re.compile(r"agent=.*status=completed"))
    expect(p.locator("tbody tr")).to_have_count(1)
    expect(p.locator("tbody tr")).to_contain_text("週休3日制")
    shoot(p, "sessions-list")

    p.goto("/agents/ben/sessions?kind=chat")
    expect(p.get_by_role("heading", name="Sessions")).to_be_visible()
    expect(p.locator("tbody tr")).to_have_count(50)
    p.get_by_label("Title contains").fill("RELEASE")
    p.get_by_role("button", name="Filter").click()
    expect(p).to_have_url(re.compile(r"/agents/ben/sessions\?q=RELEASE&kind=chat"))
    expect(p.locator("tbody tr")).to_have_count(1)
    expect(p.get_by_role("link", name="Plan the release notes")).to_be_visible()
    p.goto("/agents/ハナコ/sessions")
    expect(p.locator("tbody tr")).to_have_count(2)
    shoot(p, "sessions-agent")

    # the page lists what the API lists, in the same order
    listed = api.get("/api/sessions", params={"agentId": "ハナコ", "kind": "all"}).json()
    links = p.locator("tbody tr td:first-child a").evaluate_all("els => els.map(a => a.href)")
    assert [link.rsplit("/", 1)[1] for link in links] == [s["id"] for s in listed]


# --------------------------------------------------------------------------- live view
def test_a_turns_steps_show_while_it_runs_and_the_operator_message_reaches_it(
    page: Watched, api: httpx.Client, llm: FakeLlmServer, gate: threading.Event
) -> None:
    agent = thinking_agent(api, "ミナ")
    session_id = new_chat(api, agent["id"])
    llm.reset()
    llm.reply(
        CHAT,
        tool_reply(
            ("generate_inner_voice", {"content": THINKING}),
            ("ws_list", {"path": ""}),
            text="まず中身を見てみます。",
        ),
        text_reply(ANSWER, gate),
    )
    p = page.page
    p.goto(f"/sessions/{session_id}")
    expect(p.get_by_role("heading", name="Chat with ミナ")).to_be_visible()
    expect(p.get_by_text("Nothing has happened in this session yet.")).to_be_visible()
    wait_for_live(p)

    p.get_by_label("Message to ミナ").fill("ワークスペースに何がある？")
    p.get_by_role("button", name="Send").click()

    # the first step is on the page while the model still holds the second reply
    operator = row(p, "user", "ワークスペースに何がある？")
    expect(operator).to_contain_text("Operator")
    inner = row(p, "inner", THINKING)
    expect(inner.locator(".ev-label")).to_have_text("Inner voice")
    expect(row(p, "inner", "まず中身を見てみます。")).to_be_visible()  # the reply's own text
    action = row(p, "action", "ws_list")
    expect(action.locator(".ev-state")).to_have_text("ok")
    recorded = api.get(f"/api/sessions/{session_id}/events").json()
    (usage,) = [e["event"] for e in recorded if e["event"]["type"] == "token_usage"]
    cost = usage["metadata"]["cost_usd"]
    assert cost > 0
    expect(inner.locator(".ev-usage")).to_have_text(  # the step's tokens and cost
        f"1,200 in · 35 out tokens · ${cost:.4f} · gpt-5-mini-2025-08-07"
    )
    action.get_by_text("Arguments and result").click()
    expect(action.locator(".ev-args")).to_have_text('{\n  "path": ""\n}')
    expect(action.locator(".ev-result")).to_contain_text('"entries": []')
    assert not gate.is_set()
    expect(p.locator("#feed > li.ev-speech")).to_have_count(0)
    # inner voice is told apart by its label and its colours, not colour alone
    looks = p.evaluate(
        """() => ['.ev-inner', '.ev-action', '.ev-user'].map(s => {
              const el = document.querySelector('#feed > li' + s);
              const style = getComputedStyle(el);
              return [style.backgroundColor, style.borderLeftColor, style.borderLeftStyle];
           })"""
    )
    assert looks[0] != looks[1]
    assert looks[0] != looks[2]
    assert looks[0][2] == "dashed"
    shoot(p, "session-live-running")

    gate.set()
    speech = row(p, "speech", ANSWER)
    expect(speech).to_contain_text("ミナ")
    expect(speech.locator(".ev-usage")).to_contain_text("in ·")
    expect(p.get_by_label("Message to ミナ")).to_have_value("")  # the API took it

    messages = api.get(f"/api/sessions/{session_id}/messages").json()
    assert [(m["role"], m["speakerId"], m["content"]) for m in messages] == [
        ("user", "operator", "ワークスペースに何がある？"),
        ("assistant", agent["id"], ANSWER),
    ]
    events = api.get(f"/api/sessions/{session_id}/events").json()
    feed = p.locator("#feed")
    expect(feed).to_have_attribute("data-event-count", str(len(events)))
    expect(feed).to_have_attribute("data-last-seq", str(events[-1]["seq"]))
    expect(feed).to_have_attribute("data-last-event-id", events[-1]["event"]["id"])

    # what was drawn live reads exactly as the server renders it
    live = rows_of(p)
    p.reload()
    wait_for_live(p)
    assert rows_of(p) == live
    shoot(p, "session-live")


def test_reconnecting_misses_nothing(
    page: Watched, api: httpx.Client, llm: FakeLlmServer, gate: threading.Event
) -> None:
    agent = quiet_agent(api, "ソラ", language="ja")
    session_id = new_chat(api, agent["id"])
    second = threading.Event()
    llm.reset()
    llm.reply(
        CHAT,
        tool_reply(("ws_list", {"path": ""})),
        Reply(json=tool_reply(("ws_list", {"path": ""}), text="もう一度見ます。").json, gate=gate),
        text_reply("二回見ても空でした。", second),
    )
    p = page.page
    p.goto(f"/sessions/{session_id}")
    wait_for_live(p)
    turn = threading.Thread(
        target=lambda: api.post(
            f"/api/sessions/{session_id}/messages", json={"content": "中身は？"}, timeout=60
        )
    )
    turn.start()
    try:
        expect(p.locator("#feed > li.ev-action")).to_have_count(1)

        # the socket drops mid-turn: it comes back by itself, after its cursor
        p.evaluate("OpenCrabLive.socket.close()")
        wait_for_live(p)
        gate.set()
        expect(p.locator("#feed > li.ev-action")).to_have_count(2)

        # paused (no socket at all) while the turn ends: resuming catches up
        p.get_by_role("button", name="Pause live updates").click()
        expect(p.locator("[data-live-state]")).to_have_text("paused")
        second.set()
        turn.join(60)
        assert not turn.is_alive()
        expect(p.locator("#feed > li.ev-speech")).to_have_count(0)
        p.get_by_role("button", name="Resume live updates").click()
        wait_for_live(p)
        expect(row(p, "speech", "二回見ても空でした。")).to_be_visible()
    finally:
        gate.set()
        second.set()
        turn.join(60)

    events = api.get(f"/api/sessions/{session_id}/events").json()
    feed = p.locator("#feed")
    expect(feed).to_have_attribute("data-event-count", str(len(events)))
    ids = p.eval_on_selector_all("#feed > li", "els => els.map(el => el.dataset.eventId)")
    assert len(ids) == len(set(ids))
    shown = {
        e["event"]["id"] for e in events if e["event"]["type"] not in ("token_usage", "tool_result")
    }
    assert set(ids) == shown
    live = rows_of(p)
    p.reload()
    wait_for_live(p)
    assert rows_of(p) == live


# --------------------------------------------------------------------------- discussions
def test_a_discussion_started_from_the_form_runs_live_and_takes_a_mentor_instruction(
    page: Watched, api: httpx.Client, llm: FakeLlmServer, gate: threading.Event
) -> None:
    quiet_agent(api, "アオイ", language="ja")
    quiet_agent(api, "レン", language="ja")
    llm.reset()
    llm.reply(
        CHAT,
        text_reply("賛成です。通勤がなくなれば時間が生まれます。", gate),
        text_reply("反対です。チームの一体感が心配です。"),
    )
    p = page.page
    p.goto("/sessions")
    p.get_by_role("link", name="Start a discussion").click()
    expect(p.get_by_role("heading", name="Start a discussion")).to_be_visible()
    p.get_by_role("textbox", name="Theme").fill("リモートワークは続けるべきか")
    p.get_by_label("アオイ").check()
    p.get_by_label("レン").check()
    p.get_by_label("Maximum turns").fill("2")
    shoot(p, "discussion-new")
    p.get_by_role("button", name="Start and watch").click()

    expect(p).to_have_url(re.compile(r"/sessions/[0-9a-f-]{36}$"))
    discussion_id = p.url.rsplit("/", 1)[1]
    expect(p.get_by_role("heading", name="リモートワークは続けるべきか")).to_be_visible()
    wait_for_live(p)
    expect(row(p, "prompt", "アオイ")).to_be_visible()  # its first turn waits for the model

    p.get_by_label("Instruction to every participant").fill("コストの観点も入れてください。")
    p.get_by_role("button", name="Send").click()
    expect(row(p, "mentor", "コストの観点も入れてください。")).to_contain_text("Operator")

    gate.set()
    expect(row(p, "speech", "賛成です。")).to_contain_text("アオイ")
    expect(row(p, "speech", "反対です。")).to_contain_text("レン")
    expect(p.locator("[data-live-status]")).to_have_text("completed")
    expect(p.locator("[data-live-ended]")).to_have_text("max_turns")
    expect(p.locator("[data-intervene]")).to_be_hidden()
    shoot(p, "discussion-live")
    live = rows_of(p)
    p.reload()
    wait_for_live(p)
    assert rows_of(p) == live  # prompts, the mentor's post and speeches alike

    state = api.get(f"/api/discussions/{discussion_id}").json()
    assert (state["theme"], state["mode"], state["maxTurns"]) == (
        "リモートワークは続けるべきか",
        "autonomous",
        2,
    )
    said = [(m["role"], m["speakerName"], m["content"]) for m in state["messages"]]
    assert ("user", "Operator", "コストの観点も入れてください。") in said


def test_the_discussion_form_shows_the_apis_error(page: Watched, api: httpx.Client) -> None:
    quiet_agent(api, "ユイ")
    quiet_agent(api, "カイ")
    p = page.page
    page.allow("/api/discussions")  # the refused start: 400
    p.goto("/discussions/new?participant=ユイ")
    expect(p.get_by_label("ユイ")).to_be_checked()
    p.get_by_role("textbox", name="Theme").fill("一人で議論")
    p.get_by_role("button", name="Start and watch").click()
    expect(p.get_by_role("alert").filter(has_text="at least two participants")).to_be_visible()
    expect(p).to_have_url(re.compile(r"/discussions/new"))


def test_a_missing_session_is_a_page(page: Watched) -> None:
    page.allow("/sessions/")
    response = page.page.goto("/sessions/2b5f8c1e-0000-4000-8000-000000000000")
    assert response is not None
    assert response.status == 404
    expect(page.page.get_by_text("no session 2b5f8c1e-0000-4000-8000-000000000000")).to_be_visible()


def test_a_failed_turn_shows_its_error_live_as_on_the_server(
    page: Watched, api: httpx.Client, llm: FakeLlmServer, gate: threading.Event
) -> None:
    agent = quiet_agent(api, "ユキ", language="ja")
    session_id = new_chat(api, agent["id"])
    llm.reset()
    llm.reply(CHAT, Reply(json=completion({"content": ""}), gate=gate))
    p = page.page
    p.goto(f"/sessions/{session_id}")
    wait_for_live(p)
    turn = threading.Thread(
        target=lambda: api.post(f"/api/sessions/{session_id}/messages", json={"content": "ねえ"})
    )
    turn.start()
    expect(row(p, "user", "ねえ")).to_be_visible()
    gate.set()
    turn.join(60)
    error = p.locator("#feed > li.ev-error")
    expect(error.locator(".ev-label")).to_have_text("Error")
    expect(error.locator(".ev-usage")).to_contain_text("12 in · 3 out tokens")  # it still cost
    live = rows_of(p)
    p.reload()
    wait_for_live(p)
    assert rows_of(p) == live


def test_the_token_totals_add_the_live_events_to_those_already_shown(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    agent = quiet_agent(api, "Totals")
    session_id = new_chat(api, agent["id"])
    llm.reset()
    usage = {"prompt_tokens": 1200, "completion_tokens": 35, "total_tokens": 1235}
    llm.reply(CHAT, Reply(json=completion({"content": "an answer"}, usage=usage)))
    assert api.post(f"/api/sessions/{session_id}/messages", json={"content": "one"}).is_success
    p = page.page
    p.goto(f"/sessions/{session_id}")
    expect(p.locator("[data-total-in]")).to_have_text("1,200")
    expect(p.locator("[data-total-out]")).to_have_text("35")
    shown_cost = float(p.locator("[data-total-cost]").get_attribute("data-value") or 0)
    assert shown_cost > 0
    wait_for_live(p)

    p.get_by_label("Message to Totals").fill("two")
    p.get_by_role("button", name="Send").click()
    expect(p.locator("#feed > li.ev-speech")).to_have_count(2)
    # the first turn's tokens stay counted: 1,200 + 1,200 in, 35 + 35 out
    expect(p.locator("[data-total-in]")).to_have_text("2,400")
    expect(p.locator("[data-total-out]")).to_have_text("70")
    expect(p.locator("[data-total-in]")).to_have_attribute("data-value", "2400")
    cost = float(p.locator("[data-total-cost]").get_attribute("data-value") or 0)
    assert cost == pytest.approx(2 * shown_cost, rel=1e-6)
