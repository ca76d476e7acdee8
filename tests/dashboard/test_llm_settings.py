"""The LLM settings page (/settings/llm) and an agent's LLM tab, in Chromium.

A key typed into the page is stored encrypted: the database file (and its WAL), the
server's log and every API answer are read back and never hold it in clear; the next
call to the fake server carries it. Values the environment sets are shown locked.

`OPENCRAB_DOCS_SCREENSHOTS=1` also writes README's docs/screenshots/dashboard-llm-settings.png
(the providers as the page shows them, with the values the environment sets locked).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
from playwright.sync_api import expect

from opencrab.config import load_settings
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.metrics_rows import usage_rows
from tests.fakes.served import ServedOpenCrab

KEY = "sk-or-v1-typed-in-the-page-Zq9X"
DOCS_SHOTS = bool(os.environ.get("OPENCRAB_DOCS_SCREENSHOTS"))  # read at import
DOCS = Path(__file__).parents[2] / "docs" / "screenshots"


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
    assert (f"tests-{served.port}", "providers.openrouter.api_key", "…Zq9X") in [
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
    if DOCS_SHOTS:
        p.set_viewport_size({"width": 1280, "height": 800})
        p.screenshot(path=str(DOCS / "dashboard-llm-settings.png"))


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


def test_the_monitoring_chart_draws_the_seeded_calls(
    page: Watched, api: httpx.Client, served: ServedOpenCrab
) -> None:
    agent = make_agent(api, "監視役ミナミ", language="ja")
    rows = usage_rows([agent["id"]], days=3, per_day=12, seed=7)
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        with db.write() as conn:
            metrics_repo.insert(conn, rows)
    finally:
        db.close()
    p = page.page
    p.goto("/settings/llm?period=week")
    chart = p.locator("#monitoring-chart")
    expect(chart).to_have_attribute("data-state", "drawn")
    expect(chart.locator("canvas").first).to_be_visible()
    usage = api.get("/api/llm/monitoring", params={"period": "week"}).json()["providers"]
    drawn = chart.evaluate(
        """el => { const o = echarts.getInstanceByDom(el).getOption();
                   return { x: o.xAxis[0].data, series: o.series.map(s => [s.name, s.data]) }; }"""
    )
    assert drawn["x"] == [u["provider"] for u in usage]
    assert drawn["series"] == [
        ["median", [u["p50LatencyMs"] for u in usage]],
        ["p95", [u["p95LatencyMs"] for u in usage]],
        ["error rate", [u["errorRate"] for u in usage]],
    ]
    seeded = {r.provider for r in rows}
    assert seeded <= set(drawn["x"])
    for provider in seeded - {"openai"}:  # only the seed called these
        mine = [r for r in rows if r.provider == provider]
        shown = next(u for u in usage if u["provider"] == provider)
        assert shown["calls"] == len(mine)
        assert shown["errorRate"] == round(sum(r.status != "ok" for r in mine) / len(mine), 4)
        assert shown["p95LatencyMs"] is not None
    expect(p.locator('[data-usage="anthropic"] td').first).to_have_text(
        str(sum(r.provider == "anthropic" for r in rows))
    )  # the table is kept
    shoot(p, "llm-monitoring")


def test_long_variable_badges_wrap_between_the_names_parts(page: Watched) -> None:
    p = page.page
    p.goto("/settings/llm")
    badge = p.locator('[data-provider="ollama"] .badge.warn')
    name = "OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL"
    expect(badge).to_have_text(f"environment {name}")
    lines_of_parts = badge.evaluate(
        """(el, parts) => {
             const text = el.textContent, nodes = [];
             const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
             let at = 0;
             while (walker.nextNode()) {
               nodes.push([walker.currentNode, at]);
               at += walker.currentNode.length;
             }
             const point = (i) => {
               const [n, s] = nodes.filter(([, s]) => s <= i).pop();
               return [n, i - s];
             };
             return parts.map((part) => {
               const start = text.indexOf(part), range = document.createRange();
               range.setStart(...point(start)); range.setEnd(...point(start + part.length));
               return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
             });
           }""",
        name.split("__"),
    )
    box = badge.bounding_box()
    assert box is not None
    assert box["height"] > 30  # it does wrap in the card ...
    assert lines_of_parts == [1, 1, 1, 1]  # ... but never inside a part of the name


def test_packaged_aliases_are_folded_below_the_users_own(page: Watched, api: httpx.Client) -> None:
    fast = next(a for a in api.get("/api/llm/settings").json()["aliases"] if a["alias"] == "fast")
    body = {"provider": fast["provider"], "model": fast["model"]}  # the same model: now its own
    assert api.put("/api/llm/aliases/fast", json=body).status_code == 200
    aliases = api.get("/api/llm/settings").json()["aliases"]
    packaged = [a["alias"] for a in aliases if a["source"]["kind"] == "packaged"]
    own = [a["alias"] for a in aliases if a["source"]["kind"] != "packaged"]
    assert "fast" in own
    assert "fast" not in packaged
    assert packaged
    p = page.page
    p.goto("/settings/llm")
    section = p.locator('section[aria-labelledby="aliases-h"]')
    folded = section.locator("details.packaged-aliases")
    expect(folded).not_to_have_attribute("open", "")
    expect(folded.locator("summary")).to_contain_text(f"Packaged defaults {len(packaged)}")
    expect(folded.locator("tr[data-alias]")).to_have_count(len(packaged))
    expect(folded.locator(f'tr[data-alias="{packaged[0]}"]')).to_be_hidden()
    mine = section.locator("table.aliases").first.locator("tr[data-alias]")
    expect(mine).to_have_count(len(own))
    expect(section.locator('tr[data-alias="fast"]')).to_be_visible()
    expect(section.locator('tr[data-alias="fast"]')).to_contain_text("dashboard")
    folded.locator("summary").click()
    expect(folded.locator(f'tr[data-alias="{packaged[0]}"]')).to_be_visible()
    expect(folded.locator(f'tr[data-alias="{packaged[0]}"]')).to_contain_text("packaged default")
    shoot(p, "llm-settings-aliases")


def test_a_base_url_is_cleared_and_a_provider_without_a_key_is_not_on(
    page: Watched, api: httpx.Client
) -> None:
    def anthropic() -> dict[str, object]:
        found = api.get("/api/llm/settings").json()["providers"]
        return next(p for p in found if p["name"] == "anthropic")

    assert anthropic()["takesKey"]
    assert not anthropic()["hasKey"]
    p = page.page
    p.goto("/settings/llm")
    card = p.locator('[data-provider="anthropic"]')
    card.get_by_label("Enabled").check()
    card.get_by_label(re.compile("Base URL")).fill("http://127.0.0.1:9/proxy")
    card.get_by_role("button", name="Save anthropic").click()
    card = p.locator('[data-provider="anthropic"]')
    expect(card.get_by_label(re.compile("Base URL"))).to_have_value("http://127.0.0.1:9/proxy")
    assert anthropic()["enabled"]
    assert anthropic()["baseUrl"] == "http://127.0.0.1:9/proxy"
    # enabled, but with no key nothing can be called: no "on" badge says otherwise
    expect(card.locator(".provider-head .badge", has_text=re.compile("^on$"))).to_have_count(0)
    expect(card.locator(".provider-head")).to_contain_text("no key")
    expect(p.locator('[data-provider="openai"] .provider-head .badge.ok')).to_have_text("on")

    card.get_by_label(re.compile("Base URL")).fill("")
    with p.expect_response(lambda r: r.request.method == "PATCH") as patched:
        card.get_by_role("button", name="Save anthropic").click()
    assert patched.value.ok
    assert patched.value.request.post_data_json == {"enabled": True, "baseUrl": ""}
    p.wait_for_load_state()
    card = p.locator('[data-provider="anthropic"]')
    expect(card.get_by_label(re.compile("Base URL"))).to_have_value("")
    assert anthropic()["baseUrl"] is None
    assert anthropic()["baseUrlSource"]["kind"] != "dashboard"
