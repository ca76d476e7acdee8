"""The budgets API (server/api/budgets.py) on SQLite and PostgreSQL: fleet and agent caps
set over REST and enforced, spend and forecast per agent and fleet, alerts at 80 % and
100 % listed once, camelCase in and out, errors in the documented shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient


@pytest.fixture
def api(settings: Settings, any_db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    """The app with LLM calls recorded (so spend is known), on each database."""
    from opencrab.server.app import create_app

    recorder = MetricsRecorder(any_db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, any_db, router=router)) as client:
        yield client


def budgets(api: TestClient) -> dict[str, Any]:
    response = api.get("/api/budgets")
    assert response.status_code == 200, response.text
    return dict(response.json())


def chat(api: TestClient, agent: str) -> dict[str, Any]:
    session = api.post("/api/sessions", json={"agentId": agent}).json()["id"]
    return dict(api.post(f"/api/sessions/{session}/messages", json={"content": "Hi"}).json())


def test_fleet_caps_are_set_read_and_enforced(api: TestClient, scripted: ScriptedProvider) -> None:
    fresh = budgets(api)
    assert fresh["fleet"]["dailyCapUsd"] is None
    assert fresh["fleetCapsSource"] == "config"
    assert fresh["agents"] == []
    assert fresh["alerts"] == []

    saved = api.put("/api/budgets", json={"dailyUsd": 0.3, "monthly_usd": 10})  # snake too
    assert saved.status_code == 200, saved.text
    assert saved.json() == {"dailyUsd": 0.3, "monthlyUsd": 10.0}
    new_agent(api, "aki")
    new_agent(api, "mina")
    scripted.then(reply("Noted.", cost_usd=0.25))
    chat(api, "aki")  # 0.25: 83 % of the fleet's day
    chat(api, "mina")  # allowed (0.25 < 0.3), and crosses it: 0.5
    refused = chat(api, "aki")
    assert "the fleet has spent $0.5000 of its $0.30 daily budget" in str(refused)
    # set over the API (the Budgets page's form), so raised there, not in [budgets]
    assert "raise the fleet's daily cap on the Budgets page (/budgets)" in str(refused)
    assert "[budgets]" not in str(refused)
    assert len(scripted.requests) == 2

    view = budgets(api)
    assert view["fleetCapsSource"] == "api"
    fleet = view["fleet"]
    assert (fleet["dailyCapUsd"], fleet["monthlyCapUsd"]) == (0.3, 10.0)
    assert fleet["spentTodayUsd"] == pytest.approx(0.5)
    assert fleet["spentMonthUsd"] == pytest.approx(0.5)
    assert fleet["forecastTodayUsd"] >= fleet["spentTodayUsd"]
    assert fleet["forecastMonthUsd"] >= fleet["spentMonthUsd"]
    agents = {a["name"]: a for a in view["agents"]}
    assert agents["aki"]["spentTodayUsd"] == pytest.approx(0.25)
    assert agents["mina"]["heartbeatTodayUsd"] == 0
    alerts = [(a["scope"], a["cap"], a["thresholdPercent"]) for a in view["alerts"]]
    assert sorted(alerts) == [("fleet", "daily", 80), ("fleet", "daily", 100)]
    listed = api.get("/api/budgets/alerts").json()
    assert len(listed) == 2  # once each, however often it is read
    assert {a["agentId"] for a in listed} == {None}

    cleared = api.put("/api/budgets", json={"dailyUsd": None, "monthlyUsd": None})
    assert cleared.status_code == 200
    assert "error" not in chat(api, "aki")  # no cap: calls again


def test_an_agents_caps_change_only_its_budget(api: TestClient, scripted: ScriptedProvider) -> None:
    aki = new_agent(api, "aki", llm={"selectableModels": ["fast"]})
    put = api.put(f"/api/agents/{aki['id']}/budget", json={"dailyUsd": 1, "monthlyUsd": 0.4})
    assert put.status_code == 200, put.text
    config = api.get("/api/agents/aki/llm/config").json()
    assert (config["dailyBudgetUsd"], config["monthlyBudgetUsd"]) == (1.0, 0.4)
    assert config["selectableModels"] == ["fast"]  # the rest kept
    scripted.then(reply("Noted.", cost_usd=0.25))
    chat(api, "aki")
    chat(api, "aki")
    refused = chat(api, "aki")
    assert "agent aki has spent $0.5000 of its $0.40 monthly budget" in str(refused)
    row = budgets(api)["agents"][0]
    assert (row["dailyCapUsd"], row["monthlyCapUsd"]) == (1.0, 0.4)
    assert row["spentMonthUsd"] == pytest.approx(0.5)
    alerts = api.get("/api/budgets/alerts").json()
    assert {(a["agentName"], a["cap"], a["thresholdPercent"]) for a in alerts} == {
        ("aki", "monthly", 80),
        ("aki", "monthly", 100),
    }


def test_bad_caps_are_refused_and_nothing_changes(api: TestClient) -> None:
    api.put("/api/budgets", json={"dailyUsd": 2})
    message = error_of(api.put("/api/budgets", json={"dailyUsd": -1}), 400, "validation_error")
    assert "dailyUsd" in message
    error_of(api.put("/api/budgets", json={"weeklyUsd": 1}), 400, "validation_error")
    assert budgets(api)["fleet"]["dailyCapUsd"] == 2.0
    error_of(api.put("/api/agents/nobody/budget", json={"dailyUsd": 1}), 404, "not_found")
    error_of(api.get("/api/budgets/alerts?limit=0"), 400, "validation_error")


def test_a_cap_must_be_a_number_not_a_boolean(api: TestClient) -> None:
    error_of(api.put("/api/budgets", json={"dailyUsd": True}), 400, "validation_error")
    assert budgets(api)["fleet"]["dailyCapUsd"] is None
