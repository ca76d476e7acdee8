"""`/api/analytics/llm/*`: one filter for every figure, the figures equal SQL sums over
llm_usage_metrics, cache savings at the price table's rates, optimisation suggestions
with their evidence, and the JSON/CSV export of the same figures."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories.metrics import MetricRow
from tests.fakes.metrics_rows import usage_rows
from tests.server.conftest import error_of, new_agent

ROUTES = ("totals", "cost", "share", "quality", "efficiency", "speed", "errors", "cache")


@pytest.fixture
def seeded(client: TestClient, db: Database) -> tuple[str, str, list[MetricRow]]:
    one = new_agent(client, "経理")["id"]
    two = new_agent(client, "調査")["id"]
    rows = usage_rows([one, two, "system"], days=40, per_day=4)
    with db.write() as conn:
        metrics_repo.insert(conn, rows)
    return one, two, rows


def sql_cost(db: Database, where: str, **params: object) -> tuple[int, float]:
    query = sa.text(
        f"SELECT COUNT(*), SUM(estimated_cost_usd) FROM llm_usage_metrics WHERE {where}"
    )
    with db.read() as conn:
        n, cost = conn.execute(query, params).one()
    return int(n), float(cost or 0.0)


def test_totals_follow_the_filter(
    client: TestClient, db: Database, seeded: tuple[str, str, list[MetricRow]]
) -> None:
    one, _, rows = seeded
    everything = client.get("/api/analytics/llm/totals", params={"days": 3650}).json()
    assert (everything["calls"], everything["costUsd"]) == pytest.approx(sql_cost(db, "1 = 1"))
    assert everything["cachedTokens"] == sum(r.cache_read_tokens for r in rows)
    mine = client.get(
        "/api/analytics/llm/totals", params={"days": 3650, "agentId": "経理", "source": "imported"}
    ).json()
    assert mine["filter"]["agentId"] == one
    assert (mine["calls"], mine["costUsd"]) == pytest.approx(
        sql_cost(db, "agent_id = :a AND purpose = 'import'", a=one)
    )
    today = datetime.now(UTC).date()
    start = today - timedelta(days=9)
    recent = client.get("/api/analytics/llm/totals", params={"days": 10}).json()
    ranged = client.get(
        "/api/analytics/llm/totals", params={"from": start.isoformat(), "to": today.isoformat()}
    ).json()
    expected = [r for r in rows if r.timestamp.date() >= start]
    assert recent["calls"] == ranged["calls"] == len(expected)
    assert recent["costUsd"] == pytest.approx(sum(r.estimated_cost_usd for r in expected))


def test_every_chart_adds_up_to_the_totals(
    client: TestClient, seeded: tuple[str, str, list[MetricRow]]
) -> None:
    query = {"days": 20, "source": "live"}
    totals = client.get("/api/analytics/llm/totals", params=query).json()
    for stack in ("model", "provider", "agent", "purpose"):
        for bucket in ("day", "week"):
            series = client.get(
                "/api/analytics/llm/cost", params={**query, "stack": stack, "bucket": bucket}
            ).json()
            assert sum(p["calls"] for p in series["points"]) == totals["calls"]
            assert sum(p["costUsd"] for p in series["points"]) == pytest.approx(totals["costUsd"])
    agents = client.get("/api/analytics/llm/share", params={**query, "by": "agent"}).json()
    assert {s["label"] for s in agents["shares"]} == {"経理", "調査", "system"}
    errors = client.get("/api/analytics/llm/errors", params=query).json()
    assert sum(p["errors"] for p in errors["providers"]) == totals["errors"]
    cells = client.get("/api/analytics/llm/efficiency", params=query).json()["cells"]
    assert sum(c["calls"] for c in cells) == totals["calls"]
    assert all(c["costPerCall"] == pytest.approx(c["costUsd"] / c["calls"]) for c in cells)
    speed = client.get("/api/analytics/llm/speed", params=query).json()["models"]
    assert sum(m["calls"] for m in speed) == totals["calls"] - totals["errors"]
    assert all(m["latencyP50"] <= m["latencyP90"] <= m["latencyP99"] for m in speed)


def test_caching_saved_what_the_price_table_says(
    client: TestClient, seeded: tuple[str, str, list[MetricRow]]
) -> None:
    _, _, rows = seeded
    cache = client.get("/api/analytics/llm/cache", params={"days": 3650}).json()
    by_model = {m["model"]: m for m in cache["models"]}
    read = sum(r.cache_read_tokens for r in rows if r.model == "gpt-5-mini")
    assert by_model["gpt-5-mini"]["savedUsd"] == pytest.approx(read * (0.25 - 0.025) / 1e6)
    read = sum(r.cache_read_tokens for r in rows if r.model == "claude-sonnet-4.5")
    assert by_model["claude-sonnet-4.5"]["savedUsd"] == pytest.approx(read * (3.0 - 0.30) / 1e6)
    assert by_model["qwen3:8b"]["savedUsd"] == 0  # ollama: free, no cache rate
    assert cache["savedUsd"] == pytest.approx(sum(m["savedUsd"] for m in cache["models"]))
    inputs = sum(r.input_tokens for r in rows)
    assert cache["cachedShare"] == pytest.approx(sum(r.cache_read_tokens for r in rows) / inputs)


def test_suggestions_carry_their_evidence(
    client: TestClient, db: Database, seeded: tuple[str, str, list[MetricRow]]
) -> None:
    one, _, _ = seeded
    found = client.get("/api/analytics/llm/suggestions", params={"agentId": one}).json()
    assert found["suggestions"], found
    for s in found["suggestions"]:
        assert s["agent"] == "経理"
        assert s["suggestedModel"] != s["current"]["model"] or s["currentModel"] is None
        assert s["suggested"]["calls"] > 0
        assert s["current"]["calls"] > 0
        assert s["reason"].startswith("balance:")


def test_export_holds_what_the_routes_answer(
    client: TestClient, seeded: tuple[str, str, list[MetricRow]]
) -> None:
    query = {"days": 15, "agentId": "調査", "stack": "agent", "bucket": "week"}
    exported = client.get("/api/analytics/llm/export", params={**query, "format": "json"})
    assert exported.headers["content-disposition"] == 'attachment; filename="llm-costs.json"'
    document = exported.json()
    shown = {"cost": ("stack", "bucket"), "quality": ("bucket",)}
    for name in ROUTES:
        params = {k: v for k, v in query.items() if k in ("days", "agentId", *shown.get(name, ()))}
        answer = client.get(f"/api/analytics/llm/{name}", params=params).json()
        answer.pop("filter")
        assert document[name] == answer, name
    sheet = client.get("/api/analytics/llm/export", params={**query, "format": "csv"})
    assert sheet.headers["content-type"].startswith("text/csv")
    assert 'filename="llm-costs-cost.csv"' in sheet.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(sheet.text)))
    assert list(rows[0]) == ["bucket", "key", "label", "costUsd", "calls"]
    assert sum(float(r["costUsd"]) for r in rows) == pytest.approx(document["totals"]["costUsd"])
    assert {r["label"] for r in rows} == {"調査"}


def test_bad_filters_are_refused(client: TestClient) -> None:
    url = "/api/analytics/llm/totals"
    assert "either days or from/to" in error_of(
        client.get(url, params={"days": 7, "from": "2026-01-01"}), 400, "validation_error"
    )
    assert "before" in error_of(
        client.get(url, params={"from": "2026-02-01", "to": "2026-01-01"}), 400, "validation_error"
    )
    error_of(client.get(url, params={"source": "cloud"}), 400, "validation_error")
    error_of(client.get(url, params={"from": "0.0"}), 400, "validation_error")
    assert "not a day" in error_of(
        client.get(url, params={"to": "2026-02-30"}), 400, "validation_error"
    )
    error_of(client.get(url, params={"days": 0}), 400, "validation_error")
    error_of(client.get(url, params={"agentId": "nobody"}), 404, "not_found")
    error_of(
        client.get("/api/analytics/llm/cost", params={"stack": "colour"}), 400, "validation_error"
    )


def test_the_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for name in (*ROUTES, "suggestions", "export"):
        assert f"/api/analytics/llm/{name}" in paths
    params = {p["name"] for p in paths["/api/analytics/llm/totals"]["get"]["parameters"]}
    assert {"from", "to", "days", "agentId", "purpose", "provider", "model", "source"} <= params
