"""The inbox in Chromium against a real `opencrab up`: a held call and a ticket's
question answered from /inbox, a budget alert and a spend alarm dismissed (the Budgets
page showing the alarm's numbers), and the top bar's count on
another page following a new item live over the WebSocket."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import Locator, expect

from opencrab.config import load_settings
from opencrab.core.tools import tool_id
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.inbox_items import ask, hold_call, spend_row
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

QUESTION = "どちらのブランチに出しますか？ main と release のどちらか教えてください。"


@pytest.fixture
def store(served: ServedOpenCrab) -> Iterator[Database]:
    """The served server's own database (what another process writes)."""
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    yield db
    db.close()


def badge(page: Watched) -> str:
    return page.page.locator("[data-inbox-count]").inner_text()


def test_an_approval_and_a_question_are_answered_from_the_inbox(
    page: Watched, api: httpx.Client, store: Database, served: ServedOpenCrab, llm: FakeLlmServer
) -> None:
    writer = make_agent(
        api, "書き係", language="ja", heartbeat={"enabled": False}, toolIds=[tool_id("write_file")]
    )
    asker = make_agent(api, "聞き係", language="ja", heartbeat={"enabled": False})
    ticket, approval = hold_call(
        store, writer["id"], "書く", {"path": "メモ.txt", "content": "こんにちは"}
    )
    asked, session = ask(store, asker["id"], QUESTION)

    page.page.goto("/inbox")
    items = page.page.locator("[data-inbox-item]")
    expect(items).to_have_count(2)
    expect(page.page.locator("[data-inbox-count]")).to_have_text("2", timeout=30_000)
    first, second = items.nth(0), items.nth(1)
    expect(first).to_have_attribute("data-kind", "ticket_question")  # the newest first
    expect(first.locator(".question")).to_have_text(QUESTION)
    expect(second).to_have_attribute("data-kind", "approval")
    expect(second.locator("pre.json")).to_contain_text('"path": "メモ.txt"')
    expect(second.get_by_role("link", name="Open")).to_have_attribute("href", f"/tickets/{ticket}")
    shoot(page.page, "inbox")

    page.page.goto("/inbox?kind=approval")
    expect(items).to_have_count(1)
    page.page.goto(f"/inbox?agent={asker['name']}")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-kind", "ticket_question")
    page.page.goto("/inbox")

    approval_item = page.page.locator(f'[data-inbox-item="approval:{approval}"]')
    approval_item.get_by_role("button", name="Approve and run").click()
    expect(approval_item).to_have_count(0, timeout=30_000)
    assert api.get(f"/api/approvals/{approval}").json()["status"] == "approved"
    written = list(served.data_dir.glob("agents/*/workspace/メモ.txt"))
    assert [p.read_text() for p in written] == ["こんにちは"]

    question_item = page.page.locator(f'[data-inbox-item="ticket_question:{asked}"]')
    question_item.get_by_label("Your answer").fill("main にしてください")
    question_item.get_by_role("button", name="Answer").click()
    expect(question_item).to_have_count(0, timeout=30_000)
    said = api.get(f"/api/sessions/{session}/messages").json()
    assert [m["content"] for m in said if m["role"] == "user"] == ["main にしてください"]
    expect(page.page.locator("[data-inbox-total]")).to_have_text("0 items wait.")
    expect(page.page.locator("[data-inbox-count]")).to_be_hidden(timeout=30_000)


def shows_the_count(api: httpx.Client, shown: Locator, at_least: int) -> int:
    """Wait until `shown` says the server's inbox count, at least `at_least`; return it.

    The server is shared with the other tests of this module, whose alerts and spend
    alarms may join the inbox at any time: the badge must follow the count, whatever it is.
    """
    deadline = time.monotonic() + 30
    while True:
        count = api.get("/api/inbox/count").json()["count"]
        text = shown.text_content(timeout=30_000)
        if count >= at_least and text == str(count):
            return int(count)
        assert time.monotonic() < deadline, f"the badge says {text!r}, the server {count}"
        time.sleep(0.2)


def test_the_top_bar_count_follows_a_new_item_live(
    page: Watched, api: httpx.Client, store: Database
) -> None:
    agent = make_agent(api, "見張り", language="ja", heartbeat={"enabled": False})
    before = api.get("/api/inbox/count").json()["count"]
    ask(store, agent["id"], "一つ目の質問です")
    page.page.goto("/budgets")
    count = page.page.locator("[data-inbox-count]")
    shows_the_count(api, count, before + 1)
    page.page.evaluate("window.__same_page = true")
    ask(store, agent["id"], "二つ目の質問です")  # another process's write: no reload
    now = shows_the_count(api, count, before + 2)
    assert page.page.evaluate("window.__same_page") is True
    expect(page.page.locator("[data-inbox-link]")).to_have_attribute(
        "aria-label", f"Inbox: {now} items wait"
    )

    page.page.goto("/inbox")  # the inbox page swaps its list in when the count changes
    items = page.page.locator("[data-inbox-item]")
    expect(items.filter(has_text="二つ目の質問です")).to_have_count(1)
    page.page.evaluate("window.__same_page = true")
    ask(store, agent["id"], "三つ目の質問です")
    third = items.filter(has_text="三つ目の質問です")
    expect(third).to_have_count(1, timeout=30_000)
    expect(third.locator(".question")).to_have_text("三つ目の質問です")
    assert page.page.evaluate("window.__same_page") is True
    page.page.emulate_media(color_scheme="dark")
    shoot(page.page, "inbox-live")


def test_an_alert_and_a_spend_alarm_are_dismissed_and_the_budgets_page_shows_why(
    page: Watched, api: httpx.Client, store: Database
) -> None:
    spender = make_agent(api, "夜更かし", language="ja", heartbeat={"enabled": False})
    capped = make_agent(api, "節約家", language="ja", heartbeat={"enabled": False})
    assert api.put(f"/api/agents/{capped['id']}/budget", json={"dailyUsd": 1.0}).status_code == 200
    now = datetime.now(UTC)
    with store.write() as conn:
        metrics_repo.insert(
            conn,
            [
                spend_row(spender["id"], now, 0.9, "heartbeat"),  # on its own, nobody chatting
                spend_row(capped["id"], now, 0.85, "chat"),  # 85 % of its daily cap
            ],
        )
    page.page.goto("/budgets")  # reading the budgets records the alert
    row = page.page.locator(f'[data-burn="{spender["name"]}"]')
    expect(row.locator('[data-alarm="unattended"]')).to_contain_text("$0.90 spent today on its own")
    expect(row).to_contain_text("unattended")
    shoot(page.page, "budgets-slow-burn")

    page.page.goto("/inbox?kind=budget_alert")
    alert = page.page.locator("[data-inbox-item]")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("reached 80% of its daily budget")
    page.page.goto("/inbox?kind=spend_alarm")
    alarm = page.page.locator(f'[data-inbox-item^="spend_alarm:unattended:{spender["id"]}"]')
    expect(alarm).to_contain_text("Spend alarm (unattended) for agent 夜更かし")
    shoot(page.page, "inbox-alarm")
    alarm.get_by_role("button", name="Dismiss").click()
    expect(alarm).to_have_count(0, timeout=30_000)
    page.page.goto("/inbox?kind=budget_alert")
    alert.get_by_role("button", name="Dismiss").click()
    expect(alert).to_have_count(0, timeout=30_000)
    assert api.get("/api/inbox", params={"kind": "budget_alert"}).json()["items"] == []
