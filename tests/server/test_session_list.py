"""Listing sessions: by kind, by agent (with its discussions), by status, by title text."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.core.conftest import speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent


@pytest.fixture
def held(scripted: ScriptedProvider) -> Iterator[threading.Event]:
    """Discussions wait for the model until the test ends (they stay as they were made)."""
    scripted.hold = threading.Event()
    yield scripted.hold
    scripted.hold.set()


def chat(client: TestClient, agent: str, text: str) -> str:
    session_id = str(client.post("/api/sessions", json={"agentId": agent}).json()["id"])
    posted = client.post(f"/api/sessions/{session_id}/messages", json={"content": text})
    assert posted.status_code == 201, posted.text
    return session_id


def test_filters_by_kind_agent_status_and_title_text(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    ann, ben = new_agent(client, "ann"), new_agent(client, "ben")
    scripted.then(speak("はい"))
    tea = chat(client, "ann", "お茶の淹れ方を教えて")
    coffee = chat(client, "ben", "Coffee 100% arabica?")
    scripted.hold = threading.Event()  # the discussion waits for the model
    try:
        started = client.post(
            "/api/discussions", json={"theme": "週休3日制について", "participants": ["ann", "ben"]}
        )
        assert started.status_code == 201, started.text
        talk = started.json()["id"]

        def ids(**params: str) -> list[str]:
            response = client.get("/api/sessions", params={"kind": "all", **params})
            assert response.status_code == 200, response.text
            return [s["id"] for s in response.json()]

        assert ids() == [talk, coffee, tea]  # newest first
        # left out, `kind` is seed 002's list: tickets' sessions (none here) only
        assert client.get("/api/sessions").json() == []
        assert client.get("/api/sessions?agentId=ann").json() == []
        assert ids(kind="discussion") == [talk]
        assert ids(kind="chat") == [coffee, tea]
        assert ids(agentId="ann") == [talk, tea]  # its chat and the discussion it is in
        assert ids(agentId=ben["id"], kind="chat") == [coffee]
        assert ids(q="お茶") == [tea]
        assert ids(q="3日") == [talk]
        assert ids(q="coffee 100%") == [coffee]  # any case; % is a character, not a pattern
        assert ids(q="100%arabica") == []
        client.delete(f"/api/sessions/{tea}")
        assert ids(status="completed") == [tea]
        assert ids(limit="2", offset="1") == [talk, coffee]  # ending tea made it the newest

        listed = {s["id"]: s for s in client.get("/api/sessions?kind=all").json()}
        assert listed[tea]["title"] == "お茶の淹れ方を教えて"
        assert listed[talk]["title"] == "週休3日制について"
        assert sorted(listed[talk]["participantIds"]) == sorted([ann["id"], ben["id"]])
        assert listed[coffee]["participantIds"] == []

        found = client.get("/api/discussions", params={"agentId": "ben", "q": "週休"}).json()
        assert [d["id"] for d in found] == [talk]
        assert client.get("/api/discussions", params={"q": "nothing like it"}).json() == []
    finally:
        scripted.hold.set()


def test_a_long_first_message_makes_a_short_title(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(client, "ann")
    scripted.then(speak("ok"))
    session_id = chat(client, "ann", "長" * 500)
    (listed,) = client.get("/api/sessions?kind=chat").json()
    assert listed["id"] == session_id
    assert listed["title"] == "長" * 200


def test_bad_filters_are_named(client: TestClient) -> None:
    assert "kind" in error_of(client.get("/api/sessions?kind=meeting"), 400, "validation_error")
    assert "q" in error_of(client.get("/api/sessions?q="), 400, "validation_error")
    error_of(client.get("/api/sessions?agentId=nobody"), 404, "not_found")
    error_of(client.get("/api/discussions?agentId=nobody"), 404, "not_found")
