"""GET /api/agent-overview and /api/agents/{id}/overview: status, spend and counts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient


@pytest.fixture
def served(settings: Settings, db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    """The app with its heartbeat running and LLM calls recorded (so spend is known)."""
    from opencrab.server.app import create_app

    recorder = MetricsRecorder(db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router, heartbeat=True)) as client:
        yield client


def overview(client: TestClient) -> dict[str, dict[str, Any]]:
    response = client.get("/api/agent-overview")
    assert response.status_code == 200, response.text
    return {card["name"]: card for card in response.json()}


def test_the_overview_counts_skills_sessions_memories_and_todays_spend(
    served: TestClient, scripted: ScriptedProvider
) -> None:
    aki = new_agent(served, "aki", llm={"dailyBudgetUsd": 1.0})
    new_agent(served, "mina", identity={"name": "mina", "role": "facilitator", "jobTitle": "PM"})
    fresh = overview(served)
    assert list(fresh) == ["aki", "mina"]  # oldest first, like /api/agents
    standard = fresh["aki"]["skillCount"]
    assert standard > 0  # its standard skills, on before any turn copied them in
    assert fresh["aki"]["sessionCount"] == 0
    assert fresh["aki"]["spentTodayUsd"] == 0
    assert fresh["mina"]["role"] == "facilitator"
    assert fresh["mina"]["jobTitle"] == "PM"

    scripted.then(reply("Noted.", cost_usd=0.25))
    for _ in range(2):
        session = served.post("/api/sessions", json={"agentId": "aki"}).json()["id"]
        posted = served.post(f"/api/sessions/{session}/messages", json={"content": "Hi"})
        assert posted.status_code == 201, posted.text
    for text in ("likes tea", "works late"):
        added = served.post(
            f"/api/agents/{aki['id']}/memory/curated", json={"category": "core", "content": text}
        )
        assert added.status_code == 201, added.text
    skills = served.get(f"/api/agents/{aki['id']}/skills", params={"active": True}).json()
    served.post(f"/api/agents/{aki['id']}/skills/{skills[0]['id']}/toggle", json={"active": False})

    card = overview(served)["aki"]
    assert card["sessionCount"] == 2
    assert card["memoryCount"] == 2
    assert card["skillCount"] == standard - 1
    assert card["spentTodayUsd"] == pytest.approx(0.5)
    assert card["dailyBudgetUsd"] == 1.0
    assert card["status"] == "idle"
    assert overview(served)["mina"]["sessionCount"] == 0
    one = served.get("/api/agents/aki/overview")
    assert one.status_code == 200
    assert one.json() == card | {"heartbeat": one.json()["heartbeat"]}  # the clock moved

    served.post(f"/api/sessions/{session}/messages", json={"content": "More"})
    spent = overview(served)["aki"]
    assert (spent["spentTodayUsd"], spent["status"]) == (pytest.approx(0.75), "idle")
    served.post(f"/api/sessions/{session}/messages", json={"content": "More"})
    over = overview(served)["aki"]
    assert over["spentTodayUsd"] == pytest.approx(1.0)
    assert over["status"] == "over_budget"


def test_a_running_turn_shows_as_in_a_turn(served: TestClient, scripted: ScriptedProvider) -> None:
    new_agent(served, "aki")
    scripted.then(speak("Done."))
    scripted.hold = threading.Event()
    session = served.post("/api/sessions", json={"agentId": "aki"}).json()["id"]
    with ThreadPoolExecutor(1) as pool:
        posted = pool.submit(
            served.post, f"/api/sessions/{session}/messages", json={"content": "Think"}
        )
        card = served.get("/api/agents/aki/overview").json()
        while card["status"] != "in_turn":  # until the turn has begun (it cannot end)
            assert not posted.done(), posted.result().text
            time.sleep(0.01)
            card = served.get("/api/agents/aki/overview").json()
        assert card["turnsRunning"] == 1
        assert card["turnSince"] is not None
        scripted.hold.set()
        assert posted.result(timeout=30).status_code == 201
    card = served.get("/api/agents/aki/overview").json()
    assert (card["status"], card["turnsRunning"], card["turnSince"]) == ("idle", 0, None)


def test_the_next_heartbeat_is_within_the_agents_interval(served: TestClient) -> None:
    new_agent(served, "aki", heartbeat={"intervalSecs": 31})
    new_agent(served, "quiet", heartbeat={"intervalSecs": 31, "enabled": False})
    cards = overview(served)
    beat = cards["aki"]["heartbeat"]
    assert beat["enabled"] is True
    assert beat["intervalSecs"] == 31
    assert 0 <= beat["nextTickSecs"] <= 31
    assert cards["quiet"]["heartbeat"] == {
        "enabled": False,
        "intervalSecs": 31,
        "nextTickSecs": None,
    }


def test_without_a_heartbeat_in_this_server_no_tick_is_promised(client: TestClient) -> None:
    new_agent(client, "aki")
    [card] = client.get("/api/agent-overview").json()
    assert card["heartbeat"]["enabled"] is True
    assert card["heartbeat"]["nextTickSecs"] is None


def test_a_missing_agent_is_a_404(client: TestClient) -> None:
    message = error_of(client.get("/api/agents/nobody/overview"), 404, "not_found")
    assert "nobody" in message


def test_the_overview_reads_a_fixed_number_of_queries(served: TestClient, db: Database) -> None:
    """Not one query per agent: 2 and 40 agents cost the same number of statements."""
    counted: list[str] = []

    def count(*args: Any) -> None:
        if " leases" not in str(args[2]):  # the heartbeat leases, renewed in the background
            counted.append(str(args[2]))

    def statements() -> int:
        """The fewest statements of three reads: the app's background services (schedules,
        inbox count, MCP watcher) may run a statement of their own during one."""
        return min(one_read() for _ in range(3))

    def one_read() -> int:
        counted.clear()
        sa.event.listen(db.engine, "before_cursor_execute", count)
        try:
            assert served.get("/api/agent-overview").status_code == 200
        finally:
            sa.event.remove(db.engine, "before_cursor_execute", count)
        return len(counted)

    for n in range(2):
        new_agent(served, f"a{n}")
    few = statements()
    for n in range(2, 40):
        new_agent(served, f"a{n}")
    assert statements() == few
