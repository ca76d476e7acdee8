"""The transcripts browser by cost, in Chromium: the real corpus imported (priced), the
list ordered by cost both ways and cut at a minimum cost, as `GET /api/imports/sessions`
orders and filters it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from opencrab.config import load_settings
from opencrab.store import Database
from tests.fakes.browser import Watched, shoot
from tests.fakes.corpora import CODEX_CORPUS as CORPUS
from tests.fakes.served import ServedOpenCrab
from tests.fakes.transcripts import japanese_rollout, price_corpus_model


def import_path(api: httpx.Client, path: Path) -> None:
    """Import a folder of rollouts through the API and wait until the job is done."""
    job = api.post("/api/imports", json={"path": str(path), "source": "codex"})
    assert job.status_code == 202, job.text
    for _ in range(600):
        state = api.get(f"/api/imports/jobs/{job.json()['id']}").json()
        if state["status"] != "running":
            break
        time.sleep(0.1)
    assert state["status"] == "done", state


@pytest.fixture(scope="module")
def imported(served: ServedOpenCrab, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The corpus' six rollouts and a Japanese one, priced, in the served store."""
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        price_corpus_model(db)
    finally:
        db.close()
    with served.client(timeout=30) as api:
        import_path(api, CORPUS)
        import_path(api, japanese_rollout(tmp_path_factory.mktemp("ja") / "ja").path.parent)


def shown_ids(p: Page) -> list[str]:
    links = p.locator("table.transcripts-table tbody tr td.title-cell a")
    return [
        str(href).rsplit("/", 1)[1]
        for href in links.evaluate_all("as => as.map(a => a.getAttribute('href'))")
    ]


def test_sessions_browsed_by_cost_both_ways_and_from_a_minimum(
    page: Watched, api: httpx.Client, imported: None
) -> None:
    newest = api.get("/api/imports/sessions").json()
    high = api.get("/api/imports/sessions", params={"sort": "cost_desc"}).json()
    costs = sorted({s["costUsd"] for s in newest})
    assert len(newest) == 7
    assert len(costs) >= 3
    assert [s["id"] for s in high] != [s["id"] for s in newest]

    p = page.page
    p.goto("/transcripts")
    assert shown_ids(p) == [s["id"] for s in newest]
    expect(p.get_by_label("Order")).to_have_value("newest")
    p.get_by_label("Order").select_option(label="Cost, high to low")
    p.get_by_role("button", name="Filter").click()
    expect(p).to_have_url(re.compile(r"sort=cost_desc"))
    expect(p.get_by_label("Order")).to_have_value("cost_desc")
    assert shown_ids(p) == [s["id"] for s in high]
    cells = p.locator("table.transcripts-table tbody tr td.num:nth-child(6)")
    expect(cells.first).to_have_text(
        f"${high[0]['costUsd']:.4f}" if high[0]["costUsd"] < 1 else f"${high[0]['costUsd']:,.2f}"
    )
    p.goto("/transcripts?sort=cost_desc&q=東京の天気")  # a Japanese hit above the list
    expect(p.get_by_role("list", name="Messages found")).to_contain_text("東京の天気")
    assert shown_ids(p) == [s["id"] for s in high]
    shoot(p, "transcripts-by-cost")

    p.get_by_label("Order").select_option(label="Cost, low to high")
    p.get_by_label("Cost at least (USD)").fill(str(costs[1]))
    p.get_by_role("button", name="Filter").click()
    low = api.get("/api/imports/sessions", params={"sort": "cost_asc", "minCost": costs[1]}).json()
    assert 0 < len(low) < len(newest)
    assert shown_ids(p) == [s["id"] for s in low]
    expect(p.get_by_role("heading", name=re.compile("^Sessions"))).to_contain_text(f"({len(low)})")
    expect(p.get_by_label("Cost at least (USD)")).to_have_value(str(costs[1]))

    page.allow("/transcripts?")  # the 400 a bad minimum provokes on purpose
    response = p.goto("/transcripts?minCost=-1")
    assert response is not None
    assert response.status == 400
