"""Names reach the charts' tooltips as text, never as HTML (issue 31, point 7: an agent
named `<meta http-equiv=refresh …>` redirected the operator's browser when its node in
the relationship graph or its cell in the cost heat map was hovered).

Agents, a skill, models and task types named with HTML are put in the served store; every
chart of every page that draws them shows the tooltip of each of its points, and the
heat map and the graph are hovered with the mouse: no element of the names is created,
nothing runs, the page stays where it is, and the tooltips show the names literally."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from opencrab.config import load_settings
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.dashboard.conftest import make_agent
from tests.fakes.analytics_store import LONELY, SAKURA, TARO, seed_analytics
from tests.fakes.analytics_store import SKILL as SKILL_NAME
from tests.fakes.browser import ARTIFACTS, Watched
from tests.fakes.metrics_rows import usage_rows
from tests.fakes.served import ServedOpenCrab

IMG = "<img src=x onerror=window.__pwned=1>"
META = '<meta http-equiv=refresh content="0;url=/pwned">'
MODEL = "<img src=y onerror=window.__pwned=2>"
TASK = '<meta http-equiv=refresh content="0;url=/pwned-task">'
SKILL = "<b onmouseover=window.__pwned=3>skill</b>"

SHOW_EVERY_TIP = """() => {
  const shown = [];
  for (const el of document.querySelectorAll("[_echarts_instance_]")) {
    const chart = echarts.getInstanceByDom(el);
    (chart.getOption().series || []).forEach((s, seriesIndex) => {
      const points = Math.min((s.data || []).length, 60);
      for (let dataIndex = 0; dataIndex < points; dataIndex++) {
        chart.dispatchAction({ type: "showTip", seriesIndex, dataIndex });
        shown.push(el.textContent);
      }
      (s.edges || s.links || []).forEach((_, dataIndex) => {
        chart.dispatchAction({ type: "showTip", seriesIndex, dataIndex, dataType: "edge" });
        shown.push(el.textContent);
      });
      chart.dispatchAction({ type: "hideTip" });
    });
  }
  return shown;
}"""

INJECTED = """() => ({
  pwned: window.__pwned === undefined ? null : window.__pwned,
  elements: document.querySelectorAll(
    "img[src='x'], img[src='y'], meta[http-equiv='refresh' i], b[onmouseover]"
  ).length,
})"""


@pytest.fixture(scope="module")
def hostile(served: ServedOpenCrab) -> dict[str, str]:
    """Agents named with HTML, with activity, relations, a skill and model calls whose
    model and task type are HTML too."""
    with served.client(timeout=30) as api:
        ids = {
            SAKURA: make_agent(api, IMG, language="ja")["id"],
            TARO: make_agent(api, META, language="ja")["id"],
            LONELY: make_agent(api, "plain", language="ja")["id"],
        }
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        seed_analytics(db, ids)
        rows = usage_rows([ids[SAKURA], ids[TARO]], days=3, per_day=4)
        rows = [
            r._replace(model=MODEL, task_type=TASK) if n % 2 else r._replace(task_type=TASK)
            for n, r in enumerate(rows)
        ]
        with db.write() as conn:
            metrics_repo.insert(conn, rows)
            conn.exec_driver_sql("UPDATE skills SET name = ? WHERE name = ?", (SKILL, SKILL_NAME))
    finally:
        db.close()
    return {"img": ids[SAKURA], "meta": ids[TARO]}


def _every_tip(page: Page, path: str, least: int) -> list[str]:
    """Open `path`, wait for its charts, show every point's tooltip; what they said."""
    page.goto(path)
    charts = page.locator("[_echarts_instance_]")
    expect(charts.first).to_be_attached()
    page.wait_for_function(
        "n => document.querySelectorAll('[_echarts_instance_]').length >= n", arg=least
    )
    shown: list[str] = page.evaluate(SHOW_EVERY_TIP)
    _nothing_injected(page, path)
    return shown


def _nothing_injected(page: Page, path: str) -> None:
    found: dict[str, Any] = page.evaluate(INJECTED)
    assert found == {"pwned": None, "elements": 0}, path
    assert page.url.endswith(path), page.url


def test_names_in_every_chart_are_text(page: Watched, hostile: dict[str, str]) -> None:
    tab = page.page
    said = ""
    for path, charts in [
        ("/analytics?period=all", 4),
        (f"/agents/{hostile['img']}/analytics?period=all", 3),
        (f"/agents/{hostile['meta']}/analytics?period=all", 3),
        ("/costs", 5),
        ("/settings/llm", 1),
        ("/transcripts", 1),  # the imported calls' cost, stacked by model
    ]:
        said += "\n".join(_every_tip(tab, path, charts))
    for name in (IMG, META, MODEL, TASK, SKILL):
        assert name in said, name  # shown, literally
    _nothing_injected(tab, "/transcripts")


def _hover(page: Page, chart_id: str, pixel_of: str) -> None:
    """Move the mouse over a point of a chart (its pixel from `pixel_of`, run on the chart)."""
    page.locator(f"#{chart_id}").scroll_into_view_if_needed()
    box = page.locator(f"#{chart_id}").bounding_box()
    assert box is not None
    x, y = page.evaluate(
        f"() => {{ const chart = echarts.getInstanceByDom(document.getElementById('{chart_id}'));"
        f" return {pixel_of}; }}"
    )
    page.mouse.move(box["x"] + x, box["y"] + y)
    expect(page.locator(f"#{chart_id}")).to_contain_text(" × ")


def test_hovering_the_heat_map_and_the_graph_shows_the_names(
    page: Watched, hostile: dict[str, str]
) -> None:
    tab = page.page
    tab.goto("/costs")
    heat = tab.locator("#chart-efficiency[data-state='drawn']")
    expect(heat).to_be_attached()
    cell = next(  # a cell of the HTML-named model and task type
        i
        for i, c in enumerate(
            tab.evaluate("""() => echarts.getInstanceByDom(
                document.getElementById('chart-efficiency')).getOption().yAxis[0].data""")
        )
        if c == MODEL
    )
    tasks = tab.evaluate(
        """() => echarts.getInstanceByDom(
            document.getElementById('chart-efficiency')).getOption().xAxis[0].data"""
    )
    column = tasks.index(TASK)
    _hover(tab, "chart-efficiency", f"chart.convertToPixel({{seriesIndex: 0}}, [{column}, {cell}])")
    expect(tab.locator("#chart-efficiency")).to_contain_text(f"{MODEL} × {TASK}")
    _nothing_injected(tab, "/costs")
    tab.emulate_media(color_scheme="light")
    folder = ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(folder / "costs-heatmap-html-name.png"))  # the tooltip may overflow

    tab.goto("/analytics?period=all")
    graph = tab.locator("#graph-chart[data-state='drawn']")
    expect(graph).to_be_attached()
    tab.wait_for_function(
        """() => { const s = echarts.getInstanceByDom(document.getElementById('graph-chart'))
                   .getModel().getSeriesByIndex(0);
                   return s.getData().getItemLayout(0) != null; }"""
    )
    node = tab.evaluate(
        """(name) => { const s = echarts.getInstanceByDom(document.getElementById('graph-chart'))
                         .getModel().getSeriesByIndex(0);
                       const data = s.getData();
                       for (let i = 0; i < data.count(); i++)
                         if (data.getName(i) === name) return i;
                       return -1; }""",
        IMG,
    )
    assert node >= 0
    graph.scroll_into_view_if_needed()
    box = graph.bounding_box()
    assert box is not None
    x, y = tab.evaluate(
        """(i) => { const chart = echarts.getInstanceByDom(document.getElementById('graph-chart'));
                    const layout = chart.getModel().getSeriesByIndex(0).getData().getItemLayout(i);
                    return chart.convertToPixel({seriesIndex: 0}, layout); }""",
        node,
    )
    tab.mouse.move(box["x"] + x, box["y"] + y)
    expect(graph).to_contain_text(f"{IMG} · ")
    _nothing_injected(tab, "/analytics?period=all")
    graph.screenshot(path=str(folder / "analytics-graph-html-name.png"))
