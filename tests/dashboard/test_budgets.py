"""The Budgets page (/budgets) and the home page's alert banner, in Chromium against a
real `opencrab up`: caps set in the page are read back over REST; a chat that crosses
80 % of the agent's daily cap shows an alert on both pages; a ticket run past its
maxCostUsd shows its alerts, linked to the ticket."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import expect

from opencrab.config import load_settings
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.dashboard.conftest import BIG_USAGE, CHAT, QUIET, chat_once, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.metrics_rows import usage_rows
from tests.fakes.openai_bodies import completion
from tests.fakes.served import ServedOpenCrab
from tests.tickets.conftest import wait_for


def test_caps_set_in_the_page_apply_and_an_alert_appears_at_80_percent(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": "承知しました。"}, usage=BIG_USAGE))
    )
    hanako = make_agent(api, "ハナコ", language="ja", heartbeat=QUIET)
    make_agent(api, "タロウ", language="ja", heartbeat=QUIET)
    p = page.page
    p.goto("/budgets")
    expect(p.get_by_role("heading", name="Budgets", exact=True)).to_be_visible()
    expect(p.get_by_text("No alerts this month or the last")).to_be_visible()

    fleet = p.get_by_role("form", name="Fleet caps")
    fleet.get_by_label("Daily cap (USD)").fill("50")
    fleet.get_by_label("Monthly cap (USD)").fill("800")
    fleet.get_by_role("button", name="Save").click()
    expect(p.get_by_text("Caps set here")).to_be_visible()
    caps = api.get("/api/budgets").json()["fleet"]
    assert (caps["dailyCapUsd"], caps["monthlyCapUsd"]) == (50.0, 800.0)

    p.locator("details.agent-cap summary", has_text="ハナコ").click()
    mine = p.get_by_role("form", name="Caps of ハナコ")
    mine.get_by_label("Daily cap (USD)").fill("0.35")  # one chat ($0.315) is 90 %
    mine.get_by_role("button", name="Save").click()
    row = p.locator('tr[data-agent="ハナコ"]')
    expect(row.locator("td").nth(1)).to_have_text("$0.3500")
    config = api.get(f"/api/agents/{hanako['id']}/llm/config").json()
    assert (config["dailyBudgetUsd"], config["monthlyBudgetUsd"]) == (0.35, None)

    p.locator("details.agent-cap summary", has_text="ハナコ").click()  # reloaded: closed
    mine = p.get_by_role("form", name="Caps of ハナコ")  # a bad cap: the API's message
    mine.get_by_label("Monthly cap (USD)").fill("-1")
    page.allow("/api/agents/")  # the 400 this provokes on purpose
    mine.get_by_role("button", name="Save").click()
    expect(mine.locator('[data-error-for="monthlyUsd"]')).to_contain_text(
        "greater than or equal to 0"
    )
    assert api.get(f"/api/agents/{hanako['id']}/llm/config").json()["monthlyBudgetUsd"] is None

    chat_once(api, "ハナコ", "今日の議題は何ですか？")
    p.goto("/budgets")
    alerts = p.locator(".alert-list li", has_text="ハナコ")  # (the ticket test's too)
    expect(alerts).to_have_count(1)
    expect(alerts.first).to_contain_text("80%")
    expect(alerts.first).to_contain_text("ハナコ")
    expect(row.locator("td").nth(0)).to_have_text("$0.3150")
    expect(row.locator("[data-idle-cost]")).to_have_text("$0 / $0")
    listed = [a for a in api.get("/api/budgets/alerts").json() if a["scope"] == "agent"]
    assert [(a["agentName"], a["cap"], a["thresholdPercent"]) for a in listed] == [
        ("ハナコ", "daily", 80)
    ]
    shoot(p, "budgets")

    p.goto("/")
    banner = p.locator(".budget-alerts")
    expect(banner).to_contain_text("ハナコ reached 80% of its daily cap")
    shoot(p, "home-budget-alert")


def test_the_idle_cost_meter_and_a_seeded_agents_llm_tab(
    page: Watched, api: httpx.Client, served: ServedOpenCrab
) -> None:
    idle = make_agent(api, "待機中のユキ", language="ja", heartbeat=QUIET)
    busy = make_agent(api, "心拍のケンジ", language="ja", heartbeat=QUIET)
    config = {
        "defaultProvider": "anthropic",
        "defaultModel": "claude-sonnet-4.5",
        "models": {"thinking": {"provider": "openai", "model": "gpt-5.2"}},
        "allowSelfSelection": True,
        "selectableModels": ["fast", "cheap"],
        "dailyBudgetUsd": 1.25,
    }
    saved = api.put(f"/api/agents/{busy['id']}/llm/config", json=config)
    assert saved.status_code == 200, saved.text
    now = datetime.now(UTC)
    model = usage_rows([busy["id"]], days=1, per_day=1)[0]._replace(status="ok", error=None)
    beats = [  # two heartbeat turns and one chat: only the heartbeats are idle cost
        model._replace(
            id=str(uuid.uuid4()),
            timestamp=now,
            created_at=now,
            task_type="heartbeat",
            estimated_cost_usd=cost,
        )
        for cost in (0.0125, 0.03)
    ]
    chat = model._replace(
        id=str(uuid.uuid4()),
        timestamp=now,
        created_at=now,
        task_type="chat",
        estimated_cost_usd=0.5,
    )
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        with db.write() as conn:
            metrics_repo.insert(conn, [*beats, chat])
    finally:
        db.close()

    p = page.page
    p.goto("/budgets")
    expect(p.locator(f'tr[data-agent="{idle["name"]}"] [data-idle-cost]')).to_have_text("$0 / $0")
    expect(p.locator(f'tr[data-agent="{busy["name"]}"] [data-idle-cost]')).to_have_text(
        "$0.0425 / $0.0425"
    )
    expect(p.locator(f'tr[data-agent="{busy["name"]}"] td').nth(0)).to_have_text("$0.5425")
    listed = {a["name"]: a for a in api.get("/api/budgets").json()["agents"]}
    assert listed[busy["name"]]["heartbeatTodayUsd"] == pytest.approx(0.0425)
    assert listed[idle["name"]]["heartbeatTodayUsd"] == 0
    shoot(p, "budgets-idle-cost")

    p.goto(f"/agents/{busy['name']}/llm")
    expect(p.get_by_role("heading", name="LLM configuration")).to_be_visible()
    expect(p.get_by_label("Provider", exact=True)).to_have_value("anthropic")
    expect(p.get_by_label("Model", exact=True)).to_have_value("claude-sonnet-4.5")
    expect(p.get_by_label("thinking provider")).to_have_value("openai")
    expect(p.get_by_label("thinking model")).to_have_value("gpt-5.2")
    expect(p.get_by_label("conversation model")).to_have_value("")
    expect(p.get_by_label(re.compile("may switch its model"))).to_be_checked()
    expect(p.get_by_label(re.compile("Allowed aliases"))).to_have_value("fast, cheap")
    expect(p.get_by_label(re.compile("Daily budget"))).to_have_value("1.25")
    shoot(p, "agent-llm-seeded")


def test_a_tickets_cost_limit_alerts_on_the_page_linked_to_the_ticket(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "ws_list", "arguments": "{}"}}
    looping = completion(
        {"content": None, "tool_calls": [call]}, finish="tool_calls", usage=BIG_USAGE
    )
    fake_llm_server.reply(CHAT, Reply(json=looping))  # every reply calls a tool: more calls
    worker = make_agent(api, "ジロウ", language="ja", heartbeat=QUIET)
    params = {"maxCostUsd": 0.3}  # one call ($0.315) crosses it: the next is refused
    made = api.post(
        "/api/tickets",
        json={
            "agentId": worker["id"],
            "context": {"goal": "月次レポートの下書き"},
            "params": params,
        },
    )
    assert made.status_code == 201, made.text
    ticket = made.json()["id"]

    def ticket_alerts() -> list[dict[str, object]]:
        listed = api.get("/api/budgets/alerts").json()
        return [a for a in listed if a["ticketId"] == ticket]

    found = wait_for("the ticket's alerts", lambda: len(ticket_alerts()) == 2 and ticket_alerts())
    stopped = wait_for(
        "the ticket to be suspended",
        lambda: (t := api.get(f"/api/tickets/{ticket}").json())["status"] == "suspended" and t,
    )
    assert "maxCostUsd" in (stopped["errorMessage"] or "")
    assert sorted(a["thresholdPercent"] for a in found) == [80, 100]
    p = page.page
    p.goto("/budgets")
    items = p.locator(".alert-list li", has_text="maxCostUsd")
    expect(items).to_have_count(2)
    link = items.first.get_by_role("link", name=f"Ticket {ticket[:8]}")
    expect(link).to_have_attribute("href", f"/tickets/{ticket}")
    shoot(p, "budgets-ticket-alerts")
    p.goto("/")
    expect(p.locator(".budget-alerts")).to_contain_text("of its cost limit, maxCostUsd")

    # a spent monthly cap (not only the daily one) reads "over budget" on its card
    capped = api.put(f"/api/agents/{worker['id']}/budget", json={"monthlyUsd": 0.3})
    assert capped.status_code == 200, capped.text
    p.goto("/")
    card = p.locator('.agent-card[data-agent="ジロウ"]')
    expect(card.locator(".badge.danger")).to_have_text("over budget")
    expect(card.locator(".agent-budget-spent")).to_have_text("Monthly budget spent")
    shoot(p, "home-over-budget")
