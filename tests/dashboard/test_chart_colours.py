"""A model has one colour on every chart (issue 32, a Minor "Dashboard:" point: each
chart gave palette colours in its series' order, so "gpt-5.2" was blue on one chart and
orange on the next).

Calls of four models, some of them imported, and agents with spoken lines are put in
the served store (with the calls of an agent deleted since); the models' costs are chosen
so that the Costs page's cost chart (models by name within a day), its share pie (by cost)
and the transcripts page's chart meet them in different orders. The colours read back
from each ECharts instance are the same for a model (and for an agent: the Costs page
stacked by agent and the fleet analytics' lines spoken) in light and in dark theme, and
differ between the models of one chart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from opencrab.config import load_settings
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.dashboard.conftest import make_agent
from tests.fakes.analytics_store import LONELY, SAKURA, TARO, seed_analytics
from tests.fakes.browser import Watched, shoot
from tests.fakes.metrics_rows import usage_rows
from tests.fakes.served import ServedOpenCrab

# the calls of an agent deleted since: first in the Costs page's agent order (by id), in
# no other chart, so that the agents met in both charts are in different places
DELETED = "00000000-0000-0000-0000-000000000000"
# cost weight per model: the pie (by cost) meets them in another order than by name
WEIGHT = {"qwen3:8b": 8.0, "gpt-5-mini": 4.0, "claude-sonnet-4.5": 2.0, "gpt-5.2": 1.0}

COLOURS = """selector => {
  const chart = echarts.getInstanceByDom(document.querySelector(selector));
  const used = [];
  chart.getOption().series.forEach((s, seriesIndex) => {
    if (s.type === "pie") {
      s.data.forEach((d, dataIndex) =>
        used.push([d.name, chart.getVisual({ seriesIndex, dataIndex }, "color")]));
    } else {
      used.push([s.name, chart.getVisual({ seriesIndex, dataIndex: 0 }, "color")]);
    }
  });
  return used;
}"""


@pytest.fixture(scope="module")
def store(served: ServedOpenCrab) -> Iterator[None]:
    """Three agents (two speaking) and a deleted one, their calls of four models, some of
    them imported."""
    with served.client(timeout=30) as api:
        ids = {name: make_agent(api, name, language="ja")["id"] for name in (SAKURA, TARO, LONELY)}
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        seed_analytics(db, ids)
        rows = usage_rows([DELETED, *ids.values()], days=10, per_day=8)
        rows = [r._replace(estimated_cost_usd=0.01 * WEIGHT[r.model]) for r in rows]
        with db.write() as conn:
            metrics_repo.insert(conn, rows)
        yield
    finally:
        db.close()


def _drawn(page: Page, selector: str) -> list[tuple[str, str]]:
    page.wait_for_function(
        "s => { const el = document.querySelector(s);"
        " return el && echarts.getInstanceByDom(el) && el.dataset.state === 'drawn'; }",
        arg=selector,
    )
    return [(name, colour) for name, colour in page.evaluate(COLOURS, selector)]


def _one_colour_each(charts: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    """name -> colour over every chart; fails naming a name drawn in two colours."""
    seen: dict[str, dict[str, str]] = {}
    for chart, used in charts.items():
        colours = [colour for _, colour in used]
        assert len(set(colours)) == len(colours), f"{chart} draws two series alike: {used}"
        for name, colour in used:
            seen.setdefault(name, {})[chart] = colour
    split = {name: by for name, by in seen.items() if len(set(by.values())) > 1}
    assert not split, f"the same name in different colours: {split}"
    return {name: next(iter(by.values())) for name, by in seen.items()}


def _costs(page: Page, stack: str) -> list[tuple[str, str]]:
    page.goto("/costs")
    page.select_option("#c-stack", stack)
    expect(page.locator("#chart-cost")).to_have_attribute("data-state", "drawn")
    page.wait_for_function(
        "want => echarts.getInstanceByDom(document.getElementById('chart-cost'))"
        ".getOption().series.every((s) => want.includes(s.name))",
        arg=[*WEIGHT] if stack == "model" else [SAKURA, TARO, LONELY, DELETED],
    )
    return _drawn(page, "#chart-cost")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_model_has_one_colour_on_every_chart(page: Watched, store: None, scheme: str) -> None:
    tab = page.page
    tab.emulate_media(color_scheme=scheme)
    charts = {"costs: cost over time": _costs(tab, "model")}
    charts["costs: model share"] = _drawn(tab, "#chart-share")
    tab.goto("/transcripts")
    charts["transcripts: imported cost"] = _drawn(tab, "[data-cost-chart]")

    orders = {chart: [name for name, _ in used] for chart, used in charts.items()}
    for chart, names in orders.items():
        assert set(names) == set(WEIGHT), (chart, names)
    assert len({tuple(names) for names in orders.values()}) > 1, orders  # the orders differ
    colours = _one_colour_each(charts)
    palette = tab.evaluate("() => OpenCrabCharts.colours().palette")
    assert set(colours.values()) <= set(palette), (colours, palette)  # this theme's colours


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_an_agent_has_one_colour_on_every_chart(page: Watched, store: None, scheme: str) -> None:
    tab = page.page
    tab.emulate_media(color_scheme=scheme)
    costs = [(n, c) for n, c in _costs(tab, "agent") if n in (SAKURA, TARO)]
    tab.goto("/analytics?period=all")
    spoken = _drawn(tab, "#messages-chart")
    assert {n for n, _ in spoken} == {SAKURA, TARO} == {n for n, _ in costs}, (spoken, costs)
    _one_colour_each({"costs: cost by agent": costs, "analytics: lines spoken": spoken})


def test_costs_page_looks_right(page: Watched, store: None) -> None:
    """The Costs page with the named colours, both themes (looked at by the author)."""
    tab = page.page
    tab.goto("/costs")
    for name in ("cost", "share"):
        expect(tab.locator(f"#chart-{name}")).to_have_attribute("data-state", "drawn")
    tab.set_viewport_size({"width": 1280, "height": 1400})
    shots = shoot(tab, "costs-named-colours")
    assert all(path.stat().st_size > 0 for path in shots)
