"""An agent's skills, memory, workspace, LLM settings and analytics over REST, in-process.

Each route: the happy path, 404 for a missing agent or item, 400/409/413 for refused
changes, 400 naming the field. Turns run through the real engine with a scripted model.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.core.agent import AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_eval import evaluate
from opencrab.core.workspace import Workspace
from opencrab.llm.metrics import CallRecord, MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

MISSING = str(uuid4())


# ------------------------------------------------------------------ skills
def test_skills_list_add_refine_edit_toggle_delete(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/skills"
    standard = client.get(base).json()
    assert len(standard) == 5
    assert {s["source"] for s in standard} == {"standard"}
    assert {"id", "name", "usageCount", "isActive", "situationPattern"} <= set(standard[0])

    added = client.post(
        base,
        json={
            "name": "Summarise threads",
            "description": "Sum up a long thread",
            "guidance": "List the decisions first.",
            "actions": ["send_speech"],
        },
    )
    assert added.status_code == 201, added.text
    skill = added.json()
    assert (skill["version"], skill["source"], skill["isActive"]) == (1, "experience", True)
    refined = client.post(
        base, json={"name": "Summarise threads", "description": "d", "guidance": "Shorter."}
    )
    assert refined.json()["version"] == 2
    assert refined.json()["id"] == skill["id"]

    assert client.get(f"{base}/{skill['id']}").json()["guidance"] == "Shorter."
    assert client.get(f"{base}/Summarise threads").json()["id"] == skill["id"]
    edited = client.put(f"{base}/{skill['id']}", json={"situationPattern": "long threads"})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["situationPattern"], edited.json()["version"]) == ("long threads", 3)

    flipped = client.post(f"{base}/{skill['id']}/toggle")
    assert flipped.json()["isActive"] is False
    assert [s["name"] for s in client.get(f"{base}?active=false").json()] == ["Summarise threads"]
    assert skill["id"] not in [s["id"] for s in client.get(f"{base}?active=true").json()]
    on = client.post(f"{base}/{skill['id']}/toggle", json={"active": True})
    assert on.json()["isActive"] is True

    assert client.delete(f"{base}/{skill['id']}").status_code == 204
    error_of(client.get(f"{base}/{skill['id']}"), 404, "not_found")
    error_of(client.delete(f"{base}/{skill['id']}"), 404, "not_found")


def test_standard_skills_can_only_be_switched(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/skills"
    name = client.get(base).json()[0]["name"]
    message = error_of(
        client.post(base, json={"name": name, "description": "d", "guidance": "g"}),
        409,
        "conflict",
    )
    assert "standard" in message
    error_of(client.put(f"{base}/{name}", json={"guidance": "x"}), 409, "conflict")
    error_of(client.delete(f"{base}/{name}"), 409, "conflict")
    assert client.post(f"{base}/{name}/toggle", json={"active": False}).json()["isActive"] is False


def test_skill_input_errors(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/skills"
    bad_action = client.post(
        base, json={"name": "x", "description": "d", "guidance": "g", "actions": ["rm -rf"]}
    )
    assert "actions.0" in error_of(bad_action, 400, "validation_error")
    source = client.post(
        base, json={"name": "x", "description": "d", "guidance": "g", "source": "standard"}
    )
    assert "source" in error_of(source, 400, "validation_error")


def test_a_skill_added_over_rest_names_only_actions_the_agent_may_call(
    client: TestClient,
) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/skills"
    client.post(f"{base}/workspace-management/toggle", json={"active": False})
    before = client.get(base).json()
    sneaky = {"name": "sneaky", "description": "d", "guidance": "g", "actions": ["ws_write"]}
    message = error_of(client.post(base, json=sneaky), 400, "validation_error")
    assert "ws_write ('workspace-management', which is switched off)" in message
    kept = client.post(base, json={**sneaky, "actions": ["send_speech"]})
    assert kept.status_code == 201, kept.text
    lead_only = client.put(f"{base}/sneaky", json={"actions": ["broadcast_guidance"]})
    assert "broadcast_guidance (facilitators only)" in error_of(lead_only, 400, "validation_error")
    after = {s["name"]: s for s in client.get(base).json()}
    assert after["sneaky"]["actions"] == ["send_speech"]
    assert after["sneaky"]["version"] == 1
    assert [s for s in after.values() if s["name"] != "sneaky"] == before
    error_of(client.post(f"{base}/nope/toggle"), 404, "not_found")
    error_of(client.get(f"/api/agents/{MISSING}/skills"), 404, "not_found")
    error_of(client.get("/api/agents/nobody/skills"), 404, "not_found")


# ------------------------------------------------------------------ memory
def test_curated_memory_add_list_edit_delete(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/memory/curated"
    made = client.post(base, json={"category": "core", "content": "The user is Mina."})
    assert made.status_code == 201, made.text
    memory = made.json()
    client.post(base, json={"category": "projects", "content": "Garden planner"})
    assert [m["content"] for m in client.get(f"{base}?category=core").json()] == [
        "The user is Mina."
    ]
    assert len(client.get(base).json()) == 2
    edited = client.put(f"{base}/{memory['id']}", json={"category": "core", "content": "Mina!"})
    assert edited.json()["content"] == "Mina!"
    assert client.delete(f"{base}/{memory['id']}").status_code == 204
    error_of(client.delete(f"{base}/{memory['id']}"), 404, "not_found")
    error_of(
        client.put(f"{base}/{MISSING}", json={"category": "c", "content": "x"}), 404, "not_found"
    )
    assert "content" in error_of(
        client.post(base, json={"category": "core"}), 400, "validation_error"
    )
    blank = client.post(base, json={"category": "core", "content": "   "})
    assert "empty" in error_of(blank, 400, "validation_error")


def test_memory_of_a_turn_is_listed_and_searchable(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    scripted.then(speak("The tomatoes need water on Fridays."))
    turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": "Garden plan?"})
    assert turn.status_code == 201, turn.text

    base = f"/api/agents/{agent_id}/memory"
    sessions = client.get(f"{base}/sessions").json()
    assert [s["sessionId"] for s in sessions] == [session_id]
    assert sessions[0]["entries"] >= 2
    logs = client.get(f"{base}/sessions/{session_id}").json()
    assert any("tomatoes" in line["content"] for line in logs)
    speech = client.get(f"{base}/sessions/{session_id}?logType=speech").json()
    assert {line["logType"] for line in speech} == {"speech"}

    hits = client.post(f"{base}/search", json={"query": "tomatoes Fridays"}).json()
    assert hits
    assert "tomatoes" in hits[0]["content"]
    assert hits[0]["score"] > 0
    literal = client.post(f"{base}/search", json={"query": 'tomatoes" OR "x'}).json()
    assert literal == []  # FTS syntax in the query is literal text
    error_of(client.get(f"{base}/sessions/{MISSING}"), 404, "not_found")
    assert "query" in error_of(
        client.post(f"{base}/search", json={"query": ""}), 400, "validation_error"
    )


def test_the_same_memory_added_twice_is_merged(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/memory/curated"
    first = client.post(base, json={"category": "facts", "content": "The cat is called Tama."})
    again = client.post(base, json={"category": "facts", "content": "the cat is called tama"})
    assert again.status_code == 201
    assert (again.json()["id"], again.json()["timesSeen"]) == (first.json()["id"], 2)
    assert again.json()["createdAt"] == first.json()["createdAt"]
    assert [m["timesSeen"] for m in client.get(base).json()] == [2]


def test_memory_evals_are_listed_newest_first(client: TestClient, db: Database) -> None:
    agent = new_agent(client)
    base = f"/api/agents/{agent['id']}/memory/evals"
    assert client.get(base).json() == []
    MemoryManager(db, agent["id"]).append_session_logs(
        [
            SessionLog(session_id=str(uuid4()), log_type="speech", content=text)
            for text in ("The tomatoes need water on Fridays", "猫の名前はタマです")
        ]
    )
    aki = AgentStore(db, Settings()).get(agent["id"])
    older = asyncio.run(evaluate(db, aki, generator="builtin"))
    newer = asyncio.run(evaluate(db, aki, questions=1, generator="builtin"))
    runs = client.get(base).json()
    assert [r["id"] for r in runs] == [newer.id, older.id]
    assert runs[1]["questions"] == 2
    assert runs[1]["generator"] == "builtin"
    lexical = runs[1]["legs"]["lexical"]
    assert lexical["available"] is True
    assert lexical["recall@10"] == 1.0
    assert set(lexical) >= {"recall@1", "recall@5", "mrr", "p50Ms", "meanMs"}
    assert runs[1]["legs"]["vector"] == {
        "available": False,
        "note": "this agent's memory has no vectors yet",
        "recall@1": None,
        "recall@5": None,
        "recall@10": None,
        "mrr": None,
        "p50Ms": None,
        "meanMs": None,
        "errors": None,
    }
    assert [r["id"] for r in client.get(f"{base}?limit=1").json()] == [newer.id]
    error_of(client.get(f"/api/agents/{MISSING}/memory/evals"), 404, "not_found")
    assert "limit" in error_of(client.get(f"{base}?limit=0"), 400, "validation_error")


def test_a_search_naming_a_time_looks_in_that_span(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    scripted.then(speak("We decided to plant tomatoes."))
    client.post(f"/api/sessions/{session_id}/messages", json={"content": "Garden plan?"})
    base = f"/api/agents/{agent_id}/memory/search"
    today = client.post(base, json={"query": "what did we decide today"}).json()
    assert today
    assert today[0]["content"] == "We decided to plant tomatoes."
    assert today[0]["createdAt"].endswith("Z") or "+00:00" in today[0]["createdAt"]
    assert client.post(base, json={"query": "what did we decide last year"}).json() == []
    assert client.post(base, json={"query": "昨日"}).json() == []


# ------------------------------------------------------------------ workspace
def test_workspace_upload_list_download_delete(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/workspace"
    assert client.get(base).json()["entries"] == []
    up = client.put(f"{base}/notes/today.md", content=b"# Today\n")
    assert up.status_code == 201, up.text
    assert up.json() == {"path": "notes/today.md", "size": 8, "created": True}
    again = client.put(f"{base}/notes/today.md", content=b"# Today!\n")
    assert again.status_code == 200
    assert again.json()["created"] is False
    binary = bytes(range(256))
    assert client.put(f"{base}/data.bin", content=binary).status_code == 201

    root = client.get(base).json()
    assert [(e["name"], e["isDir"]) for e in root["entries"]] == [
        ("notes", True),
        ("data.bin", False),
    ]
    assert root["usageBytes"] == 9 + 256
    assert root["quotaBytes"] == 100 * 1024 * 1024
    assert [e["path"] for e in client.get(f"{base}?path=notes").json()["entries"]] == [
        "notes/today.md"
    ]

    down = client.get(f"{base}/data.bin?download=true")
    assert down.content == binary
    assert down.headers["content-type"] == "application/octet-stream"
    assert down.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in down.headers["content-security-policy"]
    assert 'filename="data.bin"' in down.headers["content-disposition"]
    assert client.get(f"{base}/notes/today.md").headers["content-type"].startswith("text/markdown")

    assert client.delete(f"{base}/notes").status_code == 204
    error_of(client.get(f"{base}/notes/today.md"), 404, "not_found")
    error_of(client.delete(f"{base}/notes"), 404, "not_found")
    error_of(client.get(f"{base}?path=missing"), 404, "not_found")
    error_of(client.get(f"/api/agents/{MISSING}/workspace"), 404, "not_found")


@pytest.mark.parametrize(
    "path",
    ["notes/%2e%2e/%2e%2e/escape.txt", "%2Fetc%2Fpasswd", "a%5Cb.txt", "bad%00name", "a/%2e%2e"],
)
def test_workspace_refuses_paths_outside_the_jail(
    client: TestClient, settings: Settings, path: str
) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/workspace"
    error_of(client.put(f"{base}/{path}", content=b"x"), 400, "workspace_error")
    error_of(client.get(f"{base}/{path}"), 400, "workspace_error")
    error_of(client.delete(f"{base}/{path}"), 400, "workspace_error")
    written = [p for p in settings.data_dir.rglob("*") if p.is_file() and p.suffix == ".txt"]
    assert written == []


def test_workspace_refuses_a_planted_symlink_and_folders_as_files(
    client: TestClient, settings: Settings, tmp_path: os.PathLike[str]
) -> None:
    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/workspace"
    client.put(f"{base}/dir/file.txt", content=b"x")
    ws = Workspace.for_agent(settings, agent_id)
    secret = settings.data_dir / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, ws.root / "link.txt")
    message = error_of(client.get(f"{base}/link.txt"), 400, "workspace_error")
    assert "link" in message
    error_of(client.put(f"{base}/link.txt", content=b"overwritten"), 400, "workspace_error")
    assert secret.read_text() == "top secret"
    error_of(client.get(f"{base}/dir"), 400, "workspace_error")


def test_an_upload_over_the_quota_is_refused_and_writes_nothing(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> None:
    settings.agent.max_workspace_size_mb = 1
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as client:
        agent_id = new_agent(client)["id"]
        base = f"/api/agents/{agent_id}/workspace"
        assert client.put(f"{base}/a.bin", content=b"a" * 600_000).status_code == 201
        too_big = client.put(f"{base}/b.bin", content=b"b" * 600_000)
        assert "quota" in error_of(too_big, 413, "quota_exceeded")
        huge = client.put(f"{base}/c.bin", content=b"c" * (1024 * 1024 + 1))
        assert "quota" in error_of(huge, 413, "payload_too_large")
        names = [e["name"] for e in client.get(base).json()["entries"]]
    assert names == ["a.bin"]


# ------------------------------------------------------------------ LLM
def test_llm_providers_models_and_agent_config(client: TestClient) -> None:
    providers = {p["name"]: p for p in client.get("/api/llm/providers?probe=true").json()}
    assert providers["openai"]["configured"] is True
    assert providers["openai"]["isDefault"] is True
    assert providers["openai"]["healthy"] is True
    models = client.get("/api/llm/models").json()
    assert {"models", "aliases", "problems"} == set(models)
    assert all(m["provider"] == "openai" for m in models["models"])

    agent_id = new_agent(client)["id"]
    base = f"/api/agents/{agent_id}/llm/config"
    config = client.get(base).json()
    assert config["dailyBudgetUsd"] is None
    assert {"defaultProvider", "defaultModel", "allowSelfSelection"} <= set(config)
    config.update(
        dailyBudgetUsd=0.5,
        models={"toolCalling": {"provider": "openai", "model": "gpt-5"}},
        selectableModels=["fast"],
    )
    put = client.put(base, json=config)
    assert put.status_code == 200, put.text
    saved = client.get(base).json()
    assert saved["models"]["toolCalling"] == {"provider": "openai", "model": "gpt-5"}
    assert (saved["dailyBudgetUsd"], saved["selectableModels"]) == (0.5, ["fast"])
    assert "dailyBudgetUsd" in error_of(
        client.put(base, json={**config, "dailyBudgetUsd": -1}), 400, "validation_error"
    )
    snake = client.put(base, json={"daily_budget_usd": 2.0})  # snake_case input too
    assert snake.json()["dailyBudgetUsd"] == 2.0
    assert "colour" in error_of(client.put(base, json={"colour": 1}), 400, "validation_error")
    error_of(client.get(f"/api/agents/{MISSING}/llm/config"), 404, "not_found")


@pytest.fixture
def metered(settings: Settings, db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    """An app whose router records every call in the metrics table."""
    router = LlmRouter(settings, metrics=MetricsRecorder(db))
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as c:
        yield c


def test_llm_metrics_and_analytics_follow_real_turns(
    metered: TestClient, scripted: ScriptedProvider, db: Database
) -> None:
    client = metered
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    scripted.then(
        calls(("ws_write", {"path": "plan.md", "content": "water"})),
        speak("Written."),
    )
    client.post(f"/api/sessions/{session_id}/messages", json={"content": "Write the plan"})
    MetricsRecorder(db).write(
        [
            CallRecord(
                id=str(uuid4()),
                provider="openai",
                model="gpt-5-mini",
                purpose="analysis",
                agent_id=agent_id,
                status="error",
                error_type="rate_limited",
                error="slow down",
            )
        ]
    )
    base = f"/api/agents/{agent_id}"

    def metrics() -> list[dict[str, object]]:
        return list(client.get(f"{base}/llm/metrics?period=day").json())

    rows = metrics()
    for _ in range(50):  # the recorder stores its batches on a background task
        if len(rows) >= 3:
            break
        time.sleep(0.05)
        rows = metrics()
    assert len(rows) == 3
    assert {r["status"] for r in rows} == {"ok", "error"}
    assert client.get(f"{base}/llm/metrics?limit=1").json()[0]["id"] == rows[0]["id"]

    summary = client.get(f"{base}/llm/metrics/summary?groupBy=purpose&period=all").json()
    assert summary["total"]["calls"] == 3
    assert summary["total"]["errors"] == 1
    assert {g["key"] for g in summary["groups"]} >= {"analysis"}
    assert "groupBy" in error_of(
        client.get(f"{base}/llm/metrics/summary?groupBy=colour"), 400, "validation_error"
    )
    assert "period" in error_of(
        client.get(f"{base}/llm/metrics?period=soon"), 400, "validation_error"
    )

    usage = client.get(f"{base}/analytics/usage").json()
    assert usage["sessions"] == 1
    assert usage["messages"] == {"user": 1, "assistant": 1}
    assert {a["name"]: a["calls"] for a in usage["actions"]} == {"ws_write": 1, "send_speech": 1}
    assert usage["llm"]["calls"] == 3
    assert usage["llm"]["errors"] == 1
    assert usage["workspace"] == {"files": 1, "bytes": 5}

    skills = client.get(f"{base}/analytics/skills").json()["skills"]
    assert skills[0]["usageCount"] >= 1
    assert skills[0]["actionCalls"] >= 1

    llm = client.get(f"{base}/analytics/llm?period=all").json()
    assert llm["calls"] == 3
    assert "openai/gpt-5-mini" in llm["byModel"]
    assert set(llm["byModel"]["openai/gpt-5-mini"]) >= {"usageCount", "successRate"}
    error_of(client.get(f"{base}/analytics/llm?period=soon"), 400, "validation_error")
    typo = client.get(f"{base}/llm/metrics?limt=5")
    assert "query.limt: unknown query parameter" in error_of(typo, 400, "validation_error")
    error_of(client.get(f"/api/agents/{MISSING}/analytics/usage"), 404, "not_found")
