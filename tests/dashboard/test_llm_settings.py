"""The LLM settings page (/settings/llm) and an agent's LLM tab, in Chromium.

A key typed into the page is stored encrypted: the database file (and its WAL), the
server's log and every API answer are read back and never hold it in clear; the next
call to the fake server carries it. Values the environment sets are shown locked.
"""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import expect

from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

KEY = "sk-or-v1-typed-in-the-page-Zq9X"


def test_a_key_typed_into_the_page_is_encrypted_applied_and_never_shown(
    page: Watched, api: httpx.Client, served: ServedOpenCrab, llm: FakeLlmServer
) -> None:
    p = page.page
    p.goto("/settings/llm")
    expect(p.get_by_role("heading", name=re.compile("LLM settings"))).to_be_visible()
    card = p.locator('[data-provider="openrouter"]')
    card.get_by_label(re.compile("Base URL")).fill(llm.url + "/v1")
    card.locator("#openrouter-key").fill(KEY)
    card.get_by_role("button", name="Save openrouter").click()
    card = p.locator('[data-provider="openrouter"]')
    expect(card.locator(".badge.key")).to_have_text("key ••••Zq9X")
    expect(card.locator("#openrouter-key")).to_have_value("")  # never filled back

    card.get_by_role("button", name="Test connection").click()
    expect(card.locator("[data-test-result]")).to_contain_text("Connected")
    assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"

    p.reload()  # the monitoring section counts the test call
    expect(p.locator('[data-usage="openrouter"] td').first).to_have_text("1")
    assert KEY not in p.content()
    for path in ("/api/llm/settings", "/api/llm/settings/audit", "/api/llm/monitoring"):
        assert KEY not in api.get(path).text
    assert api.get("/api/llm/settings").json()["providers"][3]["keyLast4"] == "Zq9X"
    audit = api.get("/api/llm/settings/audit").json()
    assert ("local", "providers.openrouter.api_key", "…Zq9X") in [
        (a["actor"], a["target"], a["detail"]) for a in audit
    ]
    raw = b"".join(f.read_bytes() for f in served.data_dir.glob("opencrab.db*"))
    assert len(raw) > 0
    assert KEY.encode() not in raw
    assert KEY not in served.output()


def test_values_from_the_environment_are_locked_and_named(page: Watched) -> None:
    p = page.page
    p.goto("/settings/llm")
    card = p.locator('[data-provider="openai"]')
    expect(card.get_by_label(re.compile("API key"))).to_be_disabled()
    expect(card.get_by_text("environment OPENAI_API_KEY")).to_be_visible()
    expect(card.get_by_label(re.compile("Base URL"))).to_be_disabled()


def test_an_alias_and_the_fallback_order_are_saved_from_the_page(
    page: Watched, api: httpx.Client
) -> None:
    p = page.page
    p.goto("/settings/llm")
    form = p.locator("form[data-alias-form]")
    form.get_by_label("Alias").fill("日本語モデル")  # refused: the API's message is shown
    form.get_by_label("Model").fill("x")
    page.allow("/api/llm/aliases/")
    form.get_by_role("button", name="Save alias").click()
    expect(form.locator(".form-error")).to_contain_text("letters, digits")
    form.get_by_label("Alias").fill("writer")
    form.get_by_label("Provider").select_option("anthropic")
    form.get_by_label("Model").fill("claude-sonnet-4.5")
    form.get_by_role("button", name="Save alias").click()
    expect(p.locator('tr[data-alias="writer"]')).to_contain_text("anthropic/claude-sonnet-4.5")
    p.get_by_label(re.compile("Order, one per line")).fill("anthropic\nwriter\nopenai")
    p.get_by_role("button", name="Save the order").click()
    expect(p.locator("ol.chain li")).to_have_text(["anthropic", "writer", "openai"])
    fallback = api.get("/api/llm/settings").json()["fallback"]
    assert fallback["chain"] == ["anthropic", "writer", "openai"]
    assert fallback["source"]["kind"] == "dashboard"
    shoot(p, "llm-settings")


def test_an_agents_llm_configuration_is_edited_on_its_tab(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(
        api, "llm-蟹子", description="コストを気にする調査担当のエージェント", language="ja"
    )
    p = page.page
    p.goto(f"/agents/{agent['name']}/persona")
    p.get_by_role("link", name="LLM", exact=True).last.click()
    expect(p.get_by_role("heading", name="LLM configuration")).to_be_visible()
    p.get_by_label("Provider", exact=True).select_option("openai")
    p.get_by_label("Model", exact=True).fill("gpt-5-mini")
    p.get_by_label("thinking provider").select_option("anthropic")
    p.get_by_label("thinking model").fill("claude-opus-4.6")
    p.get_by_label(re.compile("may switch its model")).uncheck()
    p.get_by_label(re.compile("Allowed aliases")).fill("fast, cheap")
    p.get_by_label(re.compile("Daily budget")).fill("2.5")
    with p.expect_navigation():  # saved, then the page reloads
        p.get_by_role("button", name="Save").click()
    expect(p.get_by_label(re.compile("Daily budget"))).to_have_value("2.5")
    expect(p.get_by_label("thinking model")).to_have_value("claude-opus-4.6")
    config = api.get(f"/api/agents/{agent['id']}/llm/config").json()
    assert config["defaultProvider"] == "openai"
    assert config["defaultModel"] == "gpt-5-mini"
    assert config["models"]["thinking"] == {"provider": "anthropic", "model": "claude-opus-4.6"}
    assert config["models"]["conversation"] is None
    assert config["allowSelfSelection"] is False
    assert config["selectableModels"] == ["fast", "cheap"]
    assert config["dailyBudgetUsd"] == 2.5
    shoot(p, "agent-llm")
