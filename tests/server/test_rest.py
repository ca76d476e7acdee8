"""REST routes in-process: agents, soul/identity, tools, sessions and the REST gateway.

Each route: the happy path, 404, 400/409 and 422, with seed 002's shapes (camelCase) and
the one error shape. Turns run through the real engine with a scripted provider.
"""

from __future__ import annotations

from uuid import uuid4

from fastapi.testclient import TestClient

from opencrab.core.tools import tool_id
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent


# ------------------------------------------------------------------ agents
def test_agent_crud_in_seed_002_shapes(client: TestClient) -> None:
    created = new_agent(client, description="notes keeper")
    assert set(created) == {
        "id",
        "name",
        "description",
        "prompt",
        "toolIds",
        "createdAt",
        "updatedAt",
    }
    assert created["toolIds"] == []
    agent_id = created["id"]
    assert client.get("/api/agents").json() == [
        {"id": agent_id, "name": "aki", "description": "notes keeper"}
    ]
    assert client.get(f"/api/agents/{agent_id}").json() == created
    grant = [tool_id("ws_write"), tool_id("search_my_history")]
    updated = client.put(f"/api/agents/{agent_id}", json={"prompt": "Longer.", "toolIds": grant})
    assert updated.status_code == 200, updated.text
    assert updated.json()["prompt"] == "Longer."
    assert sorted(updated.json()["toolIds"]) == sorted(grant)
    assert updated.json()["name"] == "aki"  # fields left out are kept
    assert client.delete(f"/api/agents/{agent_id}").status_code == 204
    error_of(client.get(f"/api/agents/{agent_id}"), 404, "not_found")
    error_of(client.delete(f"/api/agents/{agent_id}"), 404, "not_found")


def test_agent_input_errors_name_the_problem(client: TestClient) -> None:
    message = error_of(client.post("/api/agents", json={"name": "x"}), 422, "validation_error")
    assert "prompt" in message
    message = error_of(
        client.post("/api/agents", json={"name": "x", "prompt": "p", "colour": "red"}),
        422,
        "validation_error",
    )
    assert "colour" in message
    message = error_of(
        client.post("/api/agents", json={"name": str(uuid4()), "prompt": "p"}),
        400,
        "validation_error",
    )
    assert "UUID" in message
    new_agent(client, "aki")
    assert "already exists" in error_of(
        client.post("/api/agents", json={"name": "aki", "prompt": "p"}), 409, "conflict"
    )
    unknown = str(uuid4())
    message = error_of(
        client.post("/api/agents", json={"name": "b", "prompt": "p", "toolIds": [unknown]}),
        400,
        "validation_error",
    )
    assert unknown in message
    error_of(client.get("/api/agents/not-a-uuid"), 422, "validation_error")
    error_of(client.put(f"/api/agents/{uuid4()}", json={"prompt": "p"}), 404, "not_found")
    error_of(client.post("/api/agents", content=b"{not json"), 422, "validation_error")


def test_snake_case_input_is_accepted(client: TestClient) -> None:
    created = new_agent(client, tool_ids=[tool_id("ws_read")])
    assert created["toolIds"] == [tool_id("ws_read")]


def test_soul_and_identity_round_trip(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    soul = client.get(f"/api/agents/{agent_id}/soul").json()
    assert soul["persona_name"] == "aki"
    soul["personality"]["openness"] = 0.9
    soul["custom_traits"] = {"口癖": "なるほど"}
    saved = client.put(f"/api/agents/{agent_id}/soul", json=soul)
    assert saved.status_code == 200, saved.text
    assert client.get(f"/api/agents/{agent_id}/soul").json() == saved.json()
    assert saved.json()["custom_traits"] == {"口癖": "なるほど"}
    soul["personality"]["openness"] = 7  # the Big Five are 0..1
    error_of(client.put(f"/api/agents/{agent_id}/soul", json=soul), 422, "validation_error")

    who = client.get(f"/api/agents/{agent_id}/identity").json()
    who["role"] = "Facilitator"
    who["job_title"] = "司会"
    saved = client.put(f"/api/agents/{agent_id}/identity", json=who)
    assert saved.status_code == 200, saved.text
    assert client.get(f"/api/agents/{agent_id}/identity").json()["job_title"] == "司会"
    error_of(client.get(f"/api/agents/{uuid4()}/identity"), 404, "not_found")


# ------------------------------------------------------------------ tools
def test_tools_mirror_the_actions(client: TestClient) -> None:
    listed = client.get("/api/tools").json()
    names = [t["name"] for t in listed]
    assert "send_speech" in names
    assert "ws_write" in names
    assert names == sorted(names)
    one = client.get(f"/api/tools/{tool_id('ws_write')}").json()
    assert one["name"] == "ws_write"
    assert one["schema"]["required"] == ["path", "content"]
    assert set(one) == {"id", "name", "description", "schema", "createdAt"}
    error_of(client.get(f"/api/tools/{uuid4()}"), 404, "not_found")
    error_of(client.get("/api/tools/ws_write"), 422, "validation_error")


# ------------------------------------------------------------------ sessions
def test_a_posted_message_runs_a_turn_and_returns_the_reply(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    session = client.post("/api/sessions", json={"agentId": agent_id})
    assert session.status_code == 201, session.text
    session_id = session.json()["id"]
    assert session.json()["messages"] == []
    assert session.json()["status"] == "active"

    scripted.then(
        calls(("ws_write", {"path": "note.md", "content": "hello"})),
        speak("Saved your note."),
    )
    turn = client.post(
        f"/api/sessions/{session_id}/messages",
        json={"content": "Save hello", "senderId": "u-7", "senderName": "Kai"},
    )
    assert turn.status_code == 201, turn.text
    body = turn.json()
    assert body["reply"]["content"] == "Saved your note."
    assert body["reply"]["role"] == "assistant"
    assert body["userMessage"]["content"] == "Save hello"
    assert [a["name"] for a in body["actions"]] == ["ws_write", "send_speech"]
    assert body["actions"][0]["success"] is True
    assert body["traceId"] == session_id
    assert body["stoppedBy"] == "send_speech"

    messages = client.get(f"/api/sessions/{session_id}/messages").json()
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Save hello"),
        ("assistant", "Saved your note."),
    ]
    name = client.get(f"/api/agents/{agent_id}").json()["name"]
    assert [(m["speakerId"], m["speakerName"], m["interrupted"]) for m in messages] == [
        ("u-7", "Kai", False),
        (agent_id, name, False),
    ]
    newer = client.get(
        f"/api/sessions/{session_id}/messages", params={"afterId": messages[0]["id"]}
    )
    assert [m["role"] for m in newer.json()] == ["assistant"]
    events = client.get(f"/api/traces/{session_id}/events").json()
    assert events[0]["type"] == "user"
    assert events[0]["metadata"]["source"] == "rest"

    listed = client.get("/api/sessions", params={"agentId": agent_id}).json()
    assert [(s["id"], s["messageCount"]) for s in listed] == [(session_id, 2)]
    full = client.get(f"/api/sessions/{session_id}").json()
    assert len(full["messages"]) == 2

    assert client.delete(f"/api/sessions/{session_id}").status_code == 204
    assert client.get(f"/api/sessions/{session_id}").json()["status"] == "completed"
    message = error_of(
        client.post(f"/api/sessions/{session_id}/messages", json={"content": "again"}),
        400,
        "validation_error",
    )
    assert "completed" in message


def test_session_errors(client: TestClient) -> None:
    missing = str(uuid4())
    error_of(client.get(f"/api/sessions/{missing}"), 404, "not_found")
    error_of(client.get(f"/api/sessions/{missing}/messages"), 404, "not_found")
    error_of(client.delete(f"/api/sessions/{missing}"), 404, "not_found")
    error_of(
        client.post(f"/api/sessions/{missing}/messages", json={"content": "hi"}),
        404,
        "not_found",
    )
    error_of(client.post("/api/sessions", json={"agentId": missing}), 404, "not_found")
    error_of(client.post("/api/sessions", json={}), 422, "validation_error")
    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    message = error_of(
        client.post(f"/api/sessions/{session_id}/messages", json={"content": ""}),
        422,
        "validation_error",
    )
    assert "content" in message
    error_of(client.get("/api/sessions", params={"status": "sleeping"}), 422, "validation_error")
    error_of(client.get("/api/sessions", params={"limit": 0}), 422, "validation_error")


def test_a_failed_llm_call_is_reported_in_the_turn(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    from opencrab.errors import ProviderServerError

    agent_id = new_agent(client)["id"]
    session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    scripted.then(ProviderServerError("upstream broke", status=500))
    turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": "hi"})
    assert turn.status_code == 201, turn.text
    assert turn.json()["reply"] is None
    assert "upstream broke" in turn.json()["error"]
