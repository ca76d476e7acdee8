"""The analytics pages in Chromium: charts drawn from the JSON routes over a seeded store,
figures readable in the tables, a graph edge opening that pair's impressions."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from opencrab.config import load_settings
from opencrab.store.database import Database
from tests.dashboard.conftest import chat_once, make_agent
from tests.fakes.analytics_store import LONELY, SAKURA, SKILL, TARO, Seeded, seed_analytics
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

QUIET = {"enabled": False}  # no heartbeat turn adds lines while the test counts them


@pytest.fixture(scope="module")
def seeded(served: ServedOpenCrab) -> Seeded:
    with served.client(timeout=30) as api:
        ids = {
            name: make_agent(api, name, language="ja", heartbeat=QUIET)["id"]
            for name in (SAKURA, TARO, LONELY)
        }
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        return seed_analytics(db, ids)
    finally:
        db.close()


def _figures(page: Page, name: str) -> dict[str, str]:
    rows = page.locator(f'table[data-figures="{name}"] tbody tr')
    found = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("th, td").all_inner_texts()
        found[cells[0].strip()] = cells[-1].strip()
    return found


def _series(page: Page, chart_id: str) -> list[dict[str, Any]]:
    """The series the ECharts instance on #chart_id draws (name and data)."""
    page.wait_for_selector(f"#{chart_id}[data-state='drawn']")
    series: list[dict[str, Any]] = page.evaluate(
        """(id) => echarts.getInstanceByDom(document.getElementById(id)).getOption().series
                   .map((s) => ({name: s.name, type: s.type, data: s.data}))""",
        chart_id,
    )
    assert page.locator(f"#{chart_id} canvas").count() >= 1
    return series


def test_fleet_page_draws_every_chart_from_the_seeded_store(page: Watched, seeded: Seeded) -> None:
    tab = page.page
    tab.goto("/analytics")
    assert tab.locator("nav a[aria-current='page']").first.inner_text() == "Analytics"
    assert _figures(tab, "messages") == {SAKURA: "5", TARO: "1"}
    drawn = {s["name"]: s["data"][-3:] for s in _series(tab, "messages-chart")}
    assert drawn == seeded.speech
    beats = _figures(tab, "heartbeats")
    assert (beats["speak"], beats["idle"], beats["learn"]) == ("2", "4", "1")
    assert {s["name"] for s in _series(tab, "heartbeats-chart")} >= {"speak", "idle", "learn"}
    assert _figures(tab, "learning") == {"created": "2", "refined": "1", "reflections": "1"}
    assert _figures(tab, "skills")[SKILL] == "0.70"
    uses, effectiveness = _series(tab, "skills-chart")
    assert (uses["data"][0], effectiveness["data"][0]) == (5, 0.7)
    assert _figures(tab, "talks") == {SAKURA: "1", TARO: "2"}  # たろう answered さくら twice
    [talks] = _series(tab, "talks-chart")
    assert sorted(talks["data"]) == [1, 2]
    [graph] = _series(tab, "graph-chart")
    assert sorted(n["name"] for n in graph["data"]) == sorted([SAKURA, TARO, LONELY])
    shoot(tab, "analytics-fleet")


def test_clicking_a_graph_edge_opens_that_pairs_impressions(page: Watched, seeded: Seeded) -> None:
    tab = page.page
    tab.goto("/analytics")
    pair = tab.locator("details.pair")
    assert pair.count() == 1
    assert not pair.evaluate("(d) => d.open")
    _series(tab, "graph-chart")
    x, y = tab.evaluate(
        """() => {
          const chart = echarts.getInstanceByDom(document.getElementById('graph-chart'));
          const edge = chart.getModel().getSeriesByIndex(0).getGraph().getEdgeByIndex(0);
          const [a, b] = [edge.node1.getLayout(), edge.node2.getLayout()];
          const mid = [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
          return chart.convertToPixel({seriesIndex: 0}, mid);
        }"""
    )
    tab.locator("#graph-chart").click(position={"x": x, "y": y})  # on the edge's middle
    tab.wait_for_selector("details.pair[open]")
    assert "selected" in (pair.get_attribute("class") or "")
    rows = pair.locator("tr[data-impression]")
    assert sorted(rows.evaluate_all("(rs) => rs.map((r) => r.dataset.impression)")) == sorted(
        seeded.impression_ids
    )
    assert pair.get_by_text("論理的で率直").first.is_visible()
    tab.evaluate("window.scrollTo(0, 0)")
    shoot(tab, "analytics-graph-pair")


def test_an_agents_tab_shows_its_own_figures(page: Watched, seeded: Seeded) -> None:
    tab = page.page
    tab.goto(f"/agents/{TARO}/analytics?period=week")
    assert tab.locator(".tabs a[aria-current='page']").inner_text() == "Analytics"
    assert _figures(tab, "messages") == {TARO: "1"}
    [spoken] = _series(tab, "messages-chart")
    assert (spoken["name"], spoken["data"][-3:]) == (TARO, seeded.speech[TARO])
    assert _figures(tab, "heartbeats")["idle"] == "3"
    assert _figures(tab, "learning") == {"created": "1"}
    assert _figures(tab, "talks") == {TARO: "2", SAKURA: "1"}
    assert tab.locator("details.pair").count() == 1
    shoot(tab, "analytics-agent")


def test_the_figures_read_without_javascript(
    browser: Any, served: ServedOpenCrab, seeded: Seeded
) -> None:
    context = browser.new_context(base_url=served.url, java_script_enabled=False)
    served.sign_in(context)
    try:
        page = context.new_page()
        page.goto(f"/agents/{SAKURA}/analytics")
        assert _figures(page, "messages") == {SAKURA: "5"}
        assert page.locator("#messages-chart canvas").count() == 0
        assert page.locator("details.pair tr[data-impression]").count() == 2
    finally:
        context.close()


def test_an_agent_without_activity_shows_no_data(page: Watched, seeded: Seeded) -> None:
    tab = page.page
    tab.goto(f"/agents/{LONELY}/analytics")
    tab.wait_for_selector("#messages-chart[data-state='empty']")
    assert tab.locator("#messages-chart").inner_text() == "No data in this period."
    assert tab.locator("table[data-figures='messages']").count() == 0


def test_lines_spoken_count_the_agents_lines_not_the_users(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    agent = make_agent(api, "話し手", heartbeat=QUIET)
    for text in ("一つ目", "二つ目"):
        chat_once(api, agent["id"], text)  # the user's line and the agent's answer
    tab = page.page
    tab.goto(f"/agents/{agent['id']}/analytics")
    assert _figures(tab, "messages") == {"話し手": "2"}
    expect(tab.locator("[data-total=messages]")).to_have_text("2")
    [spoken] = _series(tab, "messages-chart")
    assert sum(spoken["data"]) == 2
