"""`GET /api/imports/sessions` browsed by cost (`sort`, `minCost`), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.importers.store import Importer
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.corpora import CLAUDE_FILE
from tests.fakes.corpora import CODEX_FILES as FILES
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.transcripts import price_corpus_model
from tests.server.conftest import error_of
from tests.server.local import LocalClient


@pytest.fixture
def api(settings: Settings, any_db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    """The app over a store holding the real corpus' imports, on each database."""
    price_corpus_model(any_db)
    Importer(any_db, "codex").run(FILES)
    Importer(any_db, "claude").run([CLAUDE_FILE])
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, any_db, router=router)) as client:
        yield client


def listed(api: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = api.get("/api/imports/sessions", params=params)
    assert response.status_code == 200, response.text
    return list(response.json())


def test_sessions_sorted_by_cost_and_filtered_by_a_minimum(api: TestClient) -> None:
    newest = listed(api)
    costs = sorted({s["costUsd"] for s in newest})
    assert len(newest) == 7
    assert len(costs) >= 3  # distinct costs, so the order shows
    high = listed(api, sort="cost_desc")
    low = listed(api, sort="cost_asc")
    assert [s["costUsd"] for s in high] == sorted((s["costUsd"] for s in newest), reverse=True)
    assert [s["costUsd"] for s in low] == sorted(s["costUsd"] for s in newest)
    assert high != newest
    # ties keep the newest first, on both databases alike
    assert [s["id"] for s in high if s["costUsd"] == high[-1]["costUsd"]] == [
        s["id"] for s in newest if s["costUsd"] == high[-1]["costUsd"]
    ]
    # paging follows the order
    assert listed(api, sort="cost_desc", limit=2, offset=1) == high[1:3]
    # a minimum cost: only the sessions costing at least that, counted
    floor = costs[-2]
    response = api.get("/api/imports/sessions", params={"minCost": floor, "sort": "cost_desc"})
    assert response.headers["x-total-count"] == str(sum(s["costUsd"] >= floor for s in newest))
    assert [s["id"] for s in response.json()] == [s["id"] for s in high if s["costUsd"] >= floor]
    assert listed(api, minCost=costs[-1] + 1) == []


def test_a_bad_order_or_minimum_is_refused_by_name(api: TestClient) -> None:
    message = error_of(
        api.get("/api/imports/sessions", params={"sort": "price"}), 400, "validation_error"
    )
    assert "sort" in message
    message = error_of(
        api.get("/api/imports/sessions", params={"minCost": "-1"}), 400, "validation_error"
    )
    assert "minCost" in message


def test_the_order_and_minimum_are_documented(api: TestClient) -> None:
    operation = api.get("/openapi.json").json()["paths"]["/api/imports/sessions"]["get"]
    params = {p["name"]: p for p in operation["parameters"]}
    assert params["sort"]["schema"]["enum"] == ["newest", "cost_desc", "cost_asc"]
    assert params["sort"]["schema"]["default"] == "newest"
    assert "cost" in params["sort"]["description"]
    assert params["minCost"]["schema"]["anyOf"][0]["minimum"] == 0
