"""The analytics chart routes over a store with known activity (fleet and one agent)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from opencrab.store.database import Database
from tests.fakes.analytics_store import LONELY, SAKURA, SKILL, TARO, Seeded, seed_analytics
from tests.server.conftest import error_of, new_agent


def _seed(client: TestClient, db: Database) -> Seeded:
    ids = {name: new_agent(client, name, language="ja")["id"] for name in (SAKURA, TARO, LONELY)}
    return seed_analytics(db, ids)


def _series(body: dict[str, Any], days: list[str]) -> dict[str, list[int]]:
    at = [body["days"].index(d) for d in days]
    return {s["label"]: [s["counts"][i] for i in at] for s in body["series"]}


def test_messages_per_day_for_the_fleet_and_one_agent(client: TestClient, db: Database) -> None:
    seeded = _seed(client, db)
    fleet = client.get("/api/analytics/messages", params={"period": "7d"}).json()
    assert fleet["period"] == "7d"
    assert fleet["days"][-3:] == seeded.days  # every day up to today, zeros included
    assert len(fleet["days"]) == 8
    assert _series(fleet, seeded.days) == seeded.speech  # LONELY said nothing: no series
    assert {s["key"]: s["total"] for s in fleet["series"]} == {
        seeded.ids[SAKURA]: 5,
        seeded.ids[TARO]: 1,
    }
    one = client.get(f"/api/agents/{TARO}/analytics/messages").json()
    assert _series(one, seeded.days) == {TARO: [0, 1, 0]}
    alone = client.get(f"/api/agents/{LONELY}/analytics/messages").json()
    assert [(s["label"], s["total"]) for s in alone["series"]] == [(LONELY, 0)]


def test_heartbeat_decisions_and_learning_per_day(client: TestClient, db: Database) -> None:
    seeded = _seed(client, db)
    beats = client.get("/api/analytics/heartbeats").json()
    assert _series(beats, seeded.days) == {
        "speak": [2, 0, 0],
        "learn": [0, 0, 1],
        "idle": [0, 1, 3],
        "skip": [0, 0, 1],
    }
    mine = client.get(f"/api/agents/{TARO}/analytics/heartbeats").json()
    assert {s["key"]: s["total"] for s in mine["series"]} == {
        "speak": 0,
        "learn": 0,
        "idle": 3,
        "skip": 0,
    }
    learning = client.get("/api/analytics/learning").json()
    found = _series(learning, seeded.days)
    assert found["created"] == [1, 1, 0]
    assert found["refined"] == [0, 0, 1]
    assert found["reflections"] == [0, 1, 0]
    hers = _series(client.get(f"/api/agents/{SAKURA}/analytics/learning").json(), seeded.days)
    assert (hers["created"], hers["reflections"]) == ([1, 0, 0], [0, 1, 0])


def test_fleet_skills_sum_use_and_effectiveness(client: TestClient, db: Database) -> None:
    _seed(client, db)
    body = client.get("/api/analytics/skills", params={"period": "all"}).json()
    mine = {s["name"]: s for s in body["skills"]}
    assert mine[SKILL] == {
        "name": SKILL,
        "agents": 2,
        "active": 2,
        "usageCount": 5,
        "effectiveness": 0.7,
        "actionCalls": 3,  # send_speech ran three times
    }
    assert mine["振り返り"]["effectiveness"] is None


def test_relationship_graph_and_discussion_exchanges(client: TestClient, db: Database) -> None:
    seeded = _seed(client, db)
    a, b = seeded.ids[SAKURA], seeded.ids[TARO]
    body = client.get("/api/analytics/relationships").json()
    assert {n["name"]: n["spoken"] for n in body["nodes"]} == {SAKURA: 5, TARO: 1, LONELY: 0}
    [edge] = body["edges"]  # the impression of 司会者 (a person) makes no edge
    assert {edge["source"], edge["target"]} == {a, b}
    assert edge["affinity"] == 0.0  # 賛成 (+1) one way, 反対 (-1) the other
    assert edge["agreement"] == {"賛成": 1, "反対": 1}
    assert sorted(i["id"] for i in edge["impressions"]) == sorted(seeded.impression_ids)
    held = {i["agentName"]: i for i in edge["impressions"]}
    assert held[TARO]["targetId"] == a  # named by name, found by it
    link = client.get(held[SAKURA]["url"])  # the edge links to the holder's impressions
    assert link.status_code == 200, link.text
    assert sorted(i["targetName"] for i in link.json()) == sorted([TARO, "司会者"])
    assert [(t["sourceName"], t["targetName"], t["count"]) for t in body["talks"]] == [
        (TARO, SAKURA, 2),
        (SAKURA, TARO, 1),
    ]
    lonely = client.get(f"/api/agents/{LONELY}/analytics/relationships").json()
    assert ([n["name"] for n in lonely["nodes"]], lonely["edges"], lonely["talks"]) == (
        [LONELY],
        [],
        [],
    )


def test_bad_period_and_unknown_agent_are_refused(client: TestClient) -> None:
    assert "period" in error_of(
        client.get("/api/analytics/messages", params={"period": "fortnight"}),
        400,
        "validation_error",
    )
    error_of(client.get("/api/agents/nobody/analytics/relationships"), 404, "not_found")
