"""The home page: one card per agent (status, spend, counts), creating and deleting agents."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import uuid4

import httpx
from playwright.sync_api import Locator, expect

from tests.dashboard.conftest import BIG_USAGE, CHAT, QUIET, chat_once, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion


def card(page: Watched, name: str) -> Locator:
    return page.page.locator(f'.agent-card[data-agent="{name}"]')


def count_in(card: Locator, label: str) -> Locator:
    return card.locator(".agent-counts div").filter(has_text=label).locator("dd")


def test_cards_show_role_persona_status_spend_and_counts(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": "承知しました。"}, usage=BIG_USAGE))
    )
    hanako = make_agent(
        api,
        "ハナコ",
        description="議論を整理し、全員の意見を引き出す司会役。長い説明文でも折り返して表示されます。",
        language="ja",
        identity={
            "name": "ハナコ",
            "role": "facilitator",
            "jobTitle": "研究員",
            "imageUrl": "https://example.com/hanako.png",  # another host: the CSP refuses it
        },
        soul={
            "personaName": "慎重な分析家",
            "socialStyle": {"assertiveness": -0.4, "responsiveness": -0.6},
            "personality": {"conscientiousness": 0.9},
            "thinkingStyle": {"primary": "論理的", "secondary": "直感的"},
        },
        llm={"dailyBudgetUsd": 0.3},
        heartbeat=QUIET,
    )
    make_agent(
        api,
        "タロウ",
        description="雑談が好きなエージェント",
        language="ja",
        identity={
            "name": "タロウ",
            "role": "custom:書記",
            "imageUrl": "/static/dashboard/crab.svg",
        },
        heartbeat={"intervalSecs": 3607},
    )
    chat_once(api, "ハナコ", "今日の議題は何ですか？")
    for text in ("紅茶が好き", "夜型"):
        added = api.post(
            f"/api/agents/{hanako['id']}/memory/curated", json={"category": "core", "content": text}
        )
        assert added.status_code == 201, added.text

    page.page.goto("/")
    first = card(page, "ハナコ")
    expect(first.get_by_role("heading", name="ハナコ")).to_be_visible()
    expect(first.locator(".agent-role")).to_have_text("Facilitator · 研究員")
    expect(first.locator(".agent-persona")).to_have_text(
        "慎重な分析家 · Analytical · 論理的 / 直感的 · high conscientiousness"
    )
    expect(first.locator(".agent-status")).to_have_text("over budget")
    expect(first.locator(".agent-spend")).to_contain_text("$0.3150")
    expect(first.locator(".agent-spend")).to_contain_text("of $0.3000 budget")
    expect(count_in(first, "Sessions")).to_have_text("1")
    expect(count_in(first, "Memories")).to_have_text("2")
    expect(first.locator(".agent-heartbeat")).to_have_text("Heartbeat off")
    expect(first.locator(".avatar")).to_have_text("ハ")  # its initial, nothing from outside
    expect(first.locator(".avatar img")).to_have_count(0)
    second = card(page, "タロウ")
    expect(second.locator(".agent-role")).to_have_text("書記")
    expect(second.locator(".avatar img")).to_have_attribute("src", "/static/dashboard/crab.svg")
    expect(second.locator(".agent-status")).to_have_text("idle")
    expect(second.locator(".agent-spend")).to_contain_text("$0")
    expect(second.locator(".agent-heartbeat")).to_contain_text("Next heartbeat in")
    expect(second.get_by_role("link", name="Chat with タロウ")).to_have_attribute(
        "href", "/agents/%E3%82%BF%E3%83%AD%E3%82%A6/chat"
    )

    same = {c["name"]: c for c in api.get("/api/agent-overview").json()}["ハナコ"]
    assert count_in(first, "Skills").inner_text() == str(same["skillCount"])
    assert (same["sessionCount"], same["memoryCount"], same["status"]) == (1, 2, "over_budget")
    shoot(page.page, "home")


def test_the_cards_read_without_javascript(browser: Any, api: httpx.Client, served: Any) -> None:
    make_agent(api, "ミナ", description="JavaScript なしでも読めるカード", heartbeat=QUIET)
    context = browser.new_context(base_url=served.url, java_script_enabled=False)
    served.sign_in(context)
    try:
        page = context.new_page()
        page.goto("/")
        mina = page.locator('.agent-card[data-agent="ミナ"]')
        expect(mina.locator(".agent-status")).to_have_text("idle")
        expect(count_in(mina, "Sessions")).to_have_text("0")
        expect(mina.get_by_role("link", name="Persona")).to_be_visible()
    finally:
        context.close()


def test_creating_an_agent_through_the_form(page: Watched, api: httpx.Client) -> None:
    page.page.goto("/")
    page.page.get_by_role("button", name="New agent").click()
    dialog = page.page.get_by_role("dialog", name="New agent")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Name")).to_be_focused()

    page.allow("/api/agents")  # the refused name below: 400
    dialog.get_by_label("Name").fill(str(uuid4()))
    dialog.get_by_label("Prompt").fill("会議の記録を取ります。")
    dialog.get_by_role("button", name="Create agent").click()
    error = dialog.locator('[data-error-for="name"]')
    expect(error).to_be_visible()
    expect(error).to_contain_text("name must not be a UUID")
    expect(dialog.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    shoot(page.page, "home-create-error")

    dialog.get_by_label("Name").fill("サクラ")
    dialog.get_by_label("Role").select_option("observer")
    dialog.get_by_label("Language").select_option("ja")
    dialog.get_by_label("Description").fill("静かに観察する")
    dialog.get_by_role("button", name="Create agent").click()
    expect(card(page, "サクラ")).to_be_visible()
    expect(card(page, "サクラ").locator(".agent-role")).to_have_text("Observer")

    created = api.get("/api/agents/サクラ").json()
    assert created["language"] == "ja"
    assert created["prompt"] == "会議の記録を取ります。"
    assert created["description"] == "静かに観察する"
    identity = api.get("/api/agents/サクラ/identity").json()
    assert (identity["name"], identity["role"]) == ("サクラ", "observer")


def test_a_taken_name_shows_the_apis_message(page: Watched, api: httpx.Client) -> None:
    make_agent(api, "ケン", heartbeat=QUIET)
    page.allow("/api/agents")  # 409
    page.page.goto("/")
    page.page.get_by_role("button", name="New agent").click()
    dialog = page.page.get_by_role("dialog", name="New agent")
    dialog.get_by_label("Name").fill("ケン")
    dialog.get_by_label("Prompt").fill("x")
    dialog.get_by_role("button", name="Create agent").click()
    expect(dialog.locator(".form-error")).to_contain_text("an agent named 'ケン' already exists")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()


def test_deleting_asks_first(page: Watched, api: httpx.Client) -> None:
    make_agent(api, "ジロウ", heartbeat=QUIET)
    page.page.goto("/")
    delete = card(page, "ジロウ").get_by_role("button", name="Delete ジロウ")
    asked: list[str] = []

    page.page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    delete.click()
    expect(card(page, "ジロウ")).to_be_visible()
    assert asked
    assert "Delete ジロウ" in asked[0]
    assert api.get("/api/agents/ジロウ").status_code == 200

    page.page.once("dialog", lambda d: d.accept())
    delete.click()
    expect(card(page, "ジロウ")).to_have_count(0)
    assert api.get("/api/agents/ジロウ").status_code == 404


def test_a_card_shows_in_a_turn_while_the_turn_runs(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "ユキ", heartbeat=QUIET)
    gate = threading.Event()
    fake_llm_server.reply(CHAT, Reply(gate=gate, json=completion({"content": "考えました。"})))
    page.page.goto("/")
    yuki = card(page, "ユキ")
    expect(yuki.locator(".agent-status")).to_have_text("idle")
    with ThreadPoolExecutor(1) as pool:
        turn = pool.submit(chat_once, api, "ユキ", "ゆっくり考えて")
        try:
            expect(yuki.locator(".agent-status")).to_have_text("in a turn", timeout=20_000)
            assert not turn.done()  # the model is held: the page updated by itself
            shoot(page.page, "home-in-a-turn")
        finally:
            gate.set()
        turn.result(timeout=30)
    expect(yuki.locator(".agent-status")).to_have_text("idle", timeout=20_000)
    expect(count_in(yuki, "Sessions")).to_have_text("1")
