"""The Costs page (issue 21 point 2) in Chromium over a seeded store: the totals on the
page and from the JSON routes equal sums written directly in SQL over llm_usage_metrics
for the same filter; the charts are drawn with data; a filter change updates the URL,
the totals and the charts; the exports hold what the page shows; it reads without JS."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser, Page, expect

from opencrab.config import load_settings
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.metrics_rows import usage_rows
from tests.fakes.served import ServedOpenCrab

NAMES = ("経理担当の美咲", "調査員ハルト", "翻訳者")
CHARTS = ("cost", "share", "quality", "efficiency", "speed", "errors", "cache")


@pytest.fixture(scope="module")
def fleet(served: ServedOpenCrab) -> Iterator[tuple[Database, dict[str, str]]]:
    """Three agents with Japanese names and 30 days of their calls in the served store."""
    with served.client(timeout=30) as api:
        ids = {name: make_agent(api, name, language="ja")["id"] for name in NAMES}
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    with db.write() as conn:
        metrics_repo.insert(conn, usage_rows([*ids.values(), "system"], days=30, per_day=6))
    yield db, ids
    db.close()


def sql_totals(db: Database, where: str = "1 = 1", **params: Any) -> dict[str, float]:
    """The figures of the totals cards, summed by hand in SQL (last 30 UTC days)."""
    query = sa.text(
        "SELECT COUNT(*) AS calls, SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS errors, "
        "SUM(total_tokens) AS totalTokens, SUM(cache_read_tokens) AS cachedTokens, "
        "SUM(estimated_cost_usd) AS costUsd FROM llm_usage_metrics "
        f"WHERE substr(timestamp, 1, 10) >= date('now', '-29 days') AND {where}"
    )
    with db.read() as conn:
        row = conn.execute(query, params).mappings().one()
    return {k: float(v or 0) for k, v in row.items()}


def shown_totals(page: Page) -> dict[str, float]:
    cards = page.locator("#costs-totals [data-total]")
    return {
        cards.nth(i).get_attribute("data-total") or "": float(
            cards.nth(i).get_attribute("value") or "nan"
        )
        for i in range(cards.count())
    }


def api_totals(api: httpx.Client, **query: str) -> dict[str, float]:
    body = api.get("/api/analytics/llm/totals", params={"days": "30", **query}).json()
    return {
        k: float(body[k]) for k in ("calls", "errors", "totalTokens", "cachedTokens", "costUsd")
    }


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-9) for k in a)


def wait_drawn(page: Page) -> None:
    for name in CHARTS:
        expect(page.locator(f"#chart-{name}")).to_have_attribute("data-state", "drawn")
        expect(page.locator(f"#chart-{name} canvas").first).to_be_visible()


def test_totals_reconcile_with_sql_and_the_api(
    page: Watched, api: httpx.Client, fleet: tuple[Database, dict[str, str]]
) -> None:
    db = fleet[0]
    page.page.goto("/costs")
    wait_drawn(page.page)
    expected = sql_totals(db)
    assert expected["calls"] > 0
    assert same(shown_totals(page.page), expected)
    assert same(api_totals(api), expected)
    cost = page.page.locator("[data-total=costUsd]")
    assert cost.inner_text() == f"${expected['costUsd']:,.2f}"
    for name in CHARTS:
        assert int(page.page.locator(f"#chart-{name}").get_attribute("data-points") or 0) > 0
    shoot(page.page, "costs")


def test_a_filter_change_updates_url_totals_and_charts(
    page: Watched, api: httpx.Client, fleet: tuple[Database, dict[str, str]]
) -> None:
    db, ids = fleet
    agent = ids[NAMES[1]]
    page.page.goto("/costs")
    wait_drawn(page.page)
    before = shown_totals(page.page)
    page.page.get_by_label("Agent").select_option(label=NAMES[1])
    page.page.get_by_label("Source").select_option("live")
    expected = sql_totals(db, "agent_id = :a AND purpose <> 'import'", a=agent)
    page.page.wait_for_function(
        "n => document.querySelector('[data-total=calls]').value === String(n)",
        arg=int(expected["calls"]),
    )
    assert parse_qs(urlsplit(page.page.url).query) == {
        "days": ["30"],
        "agentId": [agent],
        "source": ["live"],
    }
    assert shown_totals(page.page) != before
    assert same(shown_totals(page.page), expected)
    assert same(api_totals(api, agentId=agent, source="live"), expected)
    page.page.get_by_label("stacked by").select_option("agent")
    series = api.get(
        "/api/analytics/llm/cost",
        params={"days": "30", "agentId": agent, "source": "live", "stack": "agent"},
    ).json()
    assert {p["label"] for p in series["points"]} == {NAMES[1]}
    expect(page.page.locator("#chart-cost")).to_have_attribute(
        "data-points", str(len(series["points"]))
    )
    # the URL alone gives the same page: reload and read it again
    page.page.reload()
    wait_drawn(page.page)
    assert same(shown_totals(page.page), expected)
    expect(page.page.get_by_label("Agent")).to_have_value(agent)
    shoot(page.page, "costs-filtered")


def test_exports_hold_what_is_shown(page: Watched, fleet: tuple[Database, dict[str, str]]) -> None:
    db = fleet[0]
    page.page.goto("/costs?days=30&purpose=conversation")
    wait_drawn(page.page)
    shown = shown_totals(page.page)
    assert same(shown, sql_totals(db, "purpose = 'conversation'"))
    with page.page.expect_download() as got:
        page.page.get_by_role("link", name="JSON").click()
    document = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
    assert got.value.suggested_filename == "llm-costs.json"
    assert document["filter"]["purpose"] == "conversation"
    assert same({k: float(document["totals"][k]) for k in shown}, shown)
    with page.page.expect_download() as got:
        page.page.get_by_role("link", name="CSV: cost by day").click()
    with Path(got.value.path()).open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert sum(float(r["costUsd"]) for r in rows) == pytest.approx(shown["costUsd"])
    assert sum(int(r["calls"]) for r in rows) == shown["calls"]
    with page.page.expect_download() as got:
        page.page.get_by_role("link", name="CSV: per model").click()
    with Path(got.value.path()).open(encoding="utf-8") as f:
        models = list(csv.DictReader(f))
    table = page.page.locator("#share-table tbody tr")
    assert table.count() == len(models)
    assert [table.nth(i).locator("td").first.inner_text() for i in range(len(models))] == [
        m["label"] for m in models
    ]


def test_the_totals_read_without_javascript(
    browser: Browser, served: ServedOpenCrab, fleet: tuple[Database, dict[str, str]]
) -> None:
    db, ids = fleet
    context = browser.new_context(base_url=served.url, java_script_enabled=False)
    served.sign_in(context)
    try:
        page = context.new_page()
        page.goto("/costs?days=30&source=imported")
        assert same(shown_totals(page), sql_totals(db, "purpose = 'import'"))
        page.get_by_label("Agent").select_option(label=NAMES[0])
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**agentId=*")
        assert same(
            shown_totals(page),
            sql_totals(db, "purpose = 'import' AND agent_id = :a", a=ids[NAMES[0]]),
        )
    finally:
        context.close()


def test_the_rated_calls_bars_use_the_chart_palette_in_both_themes(
    page: Watched, fleet: tuple[Database, dict[str, str]]
) -> None:
    p = page.page
    p.goto("/costs")
    wait_drawn(p)
    read = """el => {
        const option = echarts.getInstanceByDom(el).getOption();
        const s = option.series.find(s => s.name === "rated calls");
        const root = getComputedStyle(document.documentElement);
        const css = root.getPropertyValue("--chart-8").trim();
        const opacity = s.itemStyle.opacity;
        return [s.itemStyle.color, opacity === undefined ? 1 : opacity, css];
    }"""
    quality = p.locator("#chart-quality")
    for theme in ("light", "dark"):
        p.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
        p.wait_for_function(
            """() => { const el = document.getElementById("chart-quality");
                       const s = echarts.getInstanceByDom(el).getOption().series[1];
                       return s.itemStyle.color === getComputedStyle(document.documentElement)
                         .getPropertyValue("--chart-8").trim(); }"""
        )
        colour, opacity, palette = quality.evaluate(read)
        assert (colour, opacity) == (palette, 1), theme
