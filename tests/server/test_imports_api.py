"""`/api/imports/sessions…` over imports made with the real importer."""

from __future__ import annotations

import hashlib

from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from opencrab.importers.codex import parse_file
from opencrab.importers.store import Importer
from opencrab.server.api.imports import NormalizedMessage
from opencrab.store import Database
from tests.fakes.corpora import CLAUDE_FILE, last_total
from tests.fakes.corpora import CODEX_FILES as FILES
from tests.server.conftest import error_of, new_agent


def test_sessions_detail_and_messages(client: TestClient, db: Database) -> None:
    agent = new_agent(client)
    Importer(db, "codex", agent_id=agent["id"]).run(FILES)
    Importer(db, "claude").run([CLAUDE_FILE])
    listed = client.get("/api/imports/sessions")
    assert listed.status_code == 200
    assert listed.headers["x-total-count"] == "7"
    sessions = listed.json()
    assert len(sessions) == 7
    codex = client.get("/api/imports/sessions", params={"source": "codex"}).json()
    assert {s["filePath"] for s in codex} == {str(p.resolve()) for p in FILES}
    mine = client.get("/api/imports/sessions", params={"agentId": agent["id"]}).json()
    assert len(mine) == 6
    assert client.get("/api/imports/sessions", params={"agentId": "aki"}).json() == mine
    page = client.get("/api/imports/sessions", params={"limit": 2, "offset": 6})
    assert len(page.json()) == 1
    # one session in detail
    biggest = max(FILES, key=lambda p: p.stat().st_size)
    session = next(s for s in codex if s["filePath"] == str(biggest.resolve()))
    assert session["tokens"]["totalTokens"] == last_total(biggest)
    assert session["model"] == "gpt-5.3-codex"
    detail = client.get(f"/api/imports/sessions/{session['id']}").json()
    assert detail["problemLines"] == []
    assert detail["header"]["model_provider"] == "openai"
    parsed = parse_file(biggest)
    assert detail["messagesBySourceType"] == parsed.kinds
    # messages: seed 003 field names, file order, paged, encrypted reasoning hidden
    url = f"/api/imports/sessions/{session['id']}/messages"
    first = client.get(url, params={"limit": 50})
    assert first.headers["x-total-count"] == str(len(parsed.messages))
    body = first.json()
    assert [m["id"] for m in body] == [m["id"] for m in parsed.messages[:50]]
    assert set(body[0]) >= {"id", "timestamp", "role", "source_type", "segments", "raw"}
    every = client.get(url, params={"limit": 5000}).json()
    reasoning = [m for m in every if m["raw"].get("payload_type") == "reasoning"]
    assert reasoning
    assert all("encrypted_content" not in m["raw"] for m in reasoning)
    assert all(len(m["raw"]["encrypted_sha256"]) == 64 for m in reasoning)
    raw = client.get(url, params={"limit": 5000, "includeRaw": "true"}).json()
    documented = TypeAdapter(list[NormalizedMessage])  # what the OpenAPI document promises
    assert len(documented.validate_python(raw)) == len(parsed.messages)
    secret = next(m for m in raw if m["id"] == reasoning[0]["id"])["raw"]
    assert (
        hashlib.sha256(secret["encrypted_content"].encode()).hexdigest()
        == (secret["encrypted_sha256"])
    )
    calls = client.get(url, params={"sourceType": "tool_call", "limit": 5000}).json()
    assert {m["source_type"] for m in calls} == {"tool_call"}
    results = client.get(url, params={"sourceType": "tool_result", "limit": 5000}).json()
    answered = [m for m in calls if "output" in m["tool_call"]]  # joined by call_id
    assert len(answered) == len(results) == parsed.kinds["tool_result"]
    # the same session is a trace
    trace = client.get(f"/api/traces/{session['id']}/events")
    assert trace.status_code == 200
    assert {e["type"] for e in trace.json()} >= {"user", "tool_call", "tool_result"}


def test_claude_problems_and_errors(client: TestClient, db: Database) -> None:
    Importer(db, "claude").run([CLAUDE_FILE])
    (session,) = client.get("/api/imports/sessions", params={"source": "claude"}).json()
    assert session["title"] == "Add a config file to the crab project"
    assert session["calls"] == 6
    detail = client.get(f"/api/imports/sessions/{session['id']}").json()
    assert [p["line"] for p in detail["problemLines"]] == [19, 20, 22]
    messages = client.get(f"/api/imports/sessions/{session['id']}/messages").json()
    TypeAdapter(list[NormalizedMessage]).validate_python(messages)
    assert messages[1]["segments"][0]["text"] == (
        "Please add a config file &lt;b&gt;now&lt;/b&gt; &amp; keep it small"
    )
    missing = "00000000-0000-4000-8000-000000000000"
    error_of(client.get(f"/api/imports/sessions/{missing}"), 404, "not_found")
    error_of(client.get(f"/api/imports/sessions/{missing}/messages"), 404, "not_found")
    error_of(client.get("/api/imports/sessions/not-a-uuid"), 400, "validation_error")
    error_of(
        client.get("/api/imports/sessions", params={"source": "gemini"}), 400, "validation_error"
    )
    error_of(client.get("/api/imports/sessions", params={"limt": 3}), 400, "validation_error")
    error_of(client.get("/api/imports/sessions", params={"agentId": "nobody"}), 404, "not_found")
