"""A stored API key is tied to its origin (scheme, host, port) — issue 31, point 4.

The attack: a token holder changes only a provider's base URL to a server of their own
and runs the connection test; the key must not travel with it. Two fake servers on
loopback are two origins (their ports differ): `llm` is where the key was entered for,
`other` is the listener that must never see it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from opencrab.config.loader import load_settings
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.repositories import llm_settings as repo
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.server.conftest import error_of
from tests.server.local import LocalClient

CHAT = "/v1/chat/completions"
KEY = "sk-or-v1-entered-for-the-first-origin-AB12"
NEW_KEY = "sk-or-v1-given-again-for-the-second-CD34"
ENV_KEY = "sk-or-v1-from-the-environment-EF56"


@pytest.fixture
def llm(fake_llm_server: FakeLlmServer) -> FakeLlmServer:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    return fake_llm_server


@pytest.fixture
def other() -> Iterator[FakeLlmServer]:
    """A second listener: another origin, answering like a provider would."""
    with FakeLlmServer() as server:
        server.reply(CHAT, Reply(json=completion({"content": "pong"})))
        yield server


def serve(db: Database) -> Iterator[TestClient]:
    with LocalClient(create_app(load_settings(), db)) as client:
        yield client


@pytest.fixture
def client(any_db: Database) -> Iterator[TestClient]:
    yield from serve(any_db)


def patch(client: TestClient, body: dict[str, str]) -> dict[str, object]:
    response = client.patch("/api/llm/providers/openrouter", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def openrouter_view(client: TestClient) -> dict[str, object]:
    providers = client.get("/api/llm/settings").json()["providers"]
    return dict(next(p for p in providers if p["name"] == "openrouter"))


def sent_key(server: FakeLlmServer, key: str) -> list[str]:
    """Where `server` saw `key`: the headers and bodies of every request it got."""
    seen = []
    for r in server.requests:
        seen += [name for name, value in r.headers.items() if key in value]
        if key.encode() in r.body:
            seen.append("body")
    return seen


def test_a_base_url_on_another_origin_clears_the_stored_key(
    client: TestClient, llm: FakeLlmServer, other: FakeLlmServer
) -> None:
    patch(client, {"baseUrl": llm.url + "/v1", "apiKey": KEY})
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True

    moved = patch(client, {"baseUrl": other.url + "/v1"})  # the key is not given again
    tested = client.post("/api/llm/providers/openrouter/test").json()
    assert sent_key(other, KEY) == []
    assert not any("authorization" in r.headers for r in other.requests)
    assert tested["ok"] is False
    assert "no key" in tested["error"]
    assert moved["hasKey"] is False
    assert moved["keyLast4"] is None
    assert other.url in str(moved["keyCleared"])
    assert "another origin" in str(moved["keyCleared"])

    audit = client.get("/api/llm/settings/audit").json()
    cleared = next(a for a in audit if a["target"] == "providers.openrouter.api_key")
    assert (cleared["actor"], cleared["action"]) == ("local", "clear")
    assert "origin" in cleared["detail"]
    assert other.url in cleared["detail"]
    assert KEY not in str(audit)
    assert KEY[-4:] not in cleared["detail"]
    view = client.get("/api/llm/settings").json()["providers"]
    assert next(p for p in view if p["name"] == "openrouter")["hasKey"] is False


def test_a_base_url_on_the_same_origin_keeps_the_key(
    client: TestClient, llm: FakeLlmServer
) -> None:
    patch(client, {"baseUrl": llm.url + "/v1", "apiKey": KEY})
    kept = patch(client, {"baseUrl": llm.url + "/v1/"})  # another URL, the same origin
    assert kept["hasKey"] is True
    assert kept["keyLast4"] == KEY[-4:]
    assert kept["keyCleared"] is None
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True
    assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"


def test_a_key_given_with_the_new_base_url_is_stored_for_it(
    client: TestClient, llm: FakeLlmServer, other: FakeLlmServer
) -> None:
    patch(client, {"baseUrl": llm.url + "/v1", "apiKey": KEY})
    moved = patch(client, {"baseUrl": other.url + "/v1", "apiKey": NEW_KEY})
    assert (moved["hasKey"], moved["keyLast4"], moved["keyCleared"]) == (True, "CD34", None)
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True
    assert other.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {NEW_KEY}"
    assert sent_key(other, KEY) == []
    # and back: the second key does not follow to the first origin either
    back = patch(client, {"baseUrl": llm.url + "/v1"})
    assert back["hasKey"] is False
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is False
    assert sent_key(llm, NEW_KEY) == []


def test_clearing_the_base_url_clears_a_key_entered_for_it(
    client: TestClient, llm: FakeLlmServer
) -> None:
    patch(client, {"baseUrl": llm.url + "/v1", "apiKey": KEY})
    back = patch(client, {"baseUrl": ""})  # back to the packaged https://openrouter.ai
    assert back["hasKey"] is False
    assert "https://openrouter.ai" in str(back["keyCleared"])


def test_a_stored_key_is_not_sent_when_the_origin_moved_elsewhere(
    any_db: Database, llm: FakeLlmServer, other: FakeLlmServer
) -> None:
    """A base URL stored under the key's feet (by an older version, another process or
    a config change) does not take the key along: it stays stored, unused, explained."""
    for client in serve(any_db):
        patch(client, {"baseUrl": llm.url + "/v1", "apiKey": KEY})
    with any_db.write() as conn:
        repo.save_provider(conn, "openrouter", {"base_url": other.url + "/v1"})
    for client in serve(any_db):
        tested = client.post("/api/llm/providers/openrouter/test").json()
        assert sent_key(other, KEY) == []
        assert tested["ok"] is False
        assert "enter the key again" in tested["error"]
        view = openrouter_view(client)
        assert view["hasKey"] is False
        assert "enter the key again" in view["keyProblem"]


def test_a_key_from_the_environment_does_not_follow_a_dashboard_base_url(
    monkeypatch: pytest.MonkeyPatch, any_db: Database, other: FakeLlmServer
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", ENV_KEY)  # read by the packaged config
    for client in serve(any_db):
        refused = client.patch("/api/llm/providers/openrouter", json={"baseUrl": other.url + "/v1"})
        assert openrouter_view(client)["baseUrl"] == "https://openrouter.ai/api/v1"
        message = error_of(refused, 409, "conflict")
        assert "OPENROUTER_API_KEY" in message
        assert "OPENCRAB_LLM__PROVIDERS__OPENROUTER__BASE_URL" in message
        assert client.get("/api/llm/settings/audit").json() == []
        # the same origin stays the dashboard's to change
        assert patch(client, {"baseUrl": "https://openrouter.ai/api/v2"})["hasKey"] is True
        # a key the dashboard cannot change cannot be given again here either
        refused = client.patch(
            "/api/llm/providers/openrouter",
            json={"baseUrl": other.url + "/v1", "apiKey": NEW_KEY},
        )
        assert "OPENROUTER_API_KEY" in error_of(refused, 409, "conflict")
    # a base URL on another origin stored before (an older version): the key stays home
    with any_db.write() as conn:
        repo.save_provider(conn, "openrouter", {"base_url": other.url + "/v1"})
    for client in serve(any_db):
        tested = client.post("/api/llm/providers/openrouter/test").json()
        assert sent_key(other, ENV_KEY) == []
        assert tested["ok"] is False
        assert "OPENROUTER_API_KEY" in tested["error"]
        view = openrouter_view(client)
        assert view["hasKey"] is False
        assert "OPENROUTER_API_KEY" in view["keyProblem"]
