"""Hybrid memory search over REST with the real background indexer (issue 35).

The app runs its services as `opencrab up` does, the memory-index service among them
(turned on here: the test fixtures turn it off elsewhere). Chat turns write log lines as
always; the indexer embeds them on its own (the progress route shows it reach the end),
and then the search finds by meaning, says which leg found each hit, and says in its
header that it was hybrid. Before anything is embedded, the search is lexical and says
so. The embedding progress route follows a model change."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings, load_settings
from opencrab.core.embedding import PACKAGED_NAME
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import new_agent
from tests.server.local import LocalClient
from tests.server.test_memory_export import chat


@pytest.fixture
def embedding_settings(data_dir: object, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("OPENCRAB_AGENT__MEMORY_EMBEDDING", "true")
    return load_settings()


@pytest.fixture
def embedding_client(
    embedding_settings: Settings, db: Database, scripted: ScriptedProvider
) -> Iterator[TestClient]:
    router = LlmRouter(embedding_settings)
    router.register_provider(scripted)
    with LocalClient(create_app(embedding_settings, db, router=router)) as c:
        yield c


def _wait_until_embedded(client: TestClient, agent_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 300  # the packaged model on a busy 2-core machine
    while True:
        shown = client.get(f"/api/agents/{agent_id}/memory/index").json()
        if shown["total"] and shown["embedded"] == shown["total"]:
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)


def test_the_background_indexer_makes_search_hybrid(
    embedding_client: TestClient, scripted: ScriptedProvider
) -> None:
    client = embedding_client
    agent_id = new_agent(client)["id"]
    scripted.then(speak("Noted."))
    chat(client, agent_id, "My cat is called Tama", "We deployed the server on Friday")
    shown = _wait_until_embedded(client, agent_id)
    assert shown["model"] == PACKAGED_NAME
    assert shown["text"] == f"embedded {shown['total']} of {shown['total']} with {PACKAGED_NAME}"
    assert shown["error"] is None

    found = client.post(
        f"/api/agents/{agent_id}/memory/search", json={"query": "what pet do I have", "limit": 3}
    )
    assert found.status_code == 200, found.text
    assert found.headers["x-memory-search"].startswith("hybrid: lexical + vector")
    first = found.json()[0]
    assert first["content"] == "My cat is called Tama"
    assert first["legs"] == ["vector"]

    both = client.post(f"/api/agents/{agent_id}/memory/search", json={"query": "Tama"}).json()
    assert both[0]["content"] == "My cat is called Tama"
    assert both[0]["legs"] == ["lexical", "vector"]

    # a time in the query: both legs search its span, the header gives it, and every hit
    # keeps its legs and its time
    today = client.post(
        f"/api/agents/{agent_id}/memory/search", json={"query": "what pet do I have today"}
    )
    assert today.status_code == 200, today.text
    assert today.headers["x-memory-search"].startswith("hybrid: lexical + vector")
    start, end = (datetime.fromisoformat(t) for t in today.headers["x-memory-window"].split("/"))
    hits = today.json()
    assert hits[0]["content"] == "My cat is called Tama"
    assert "vector" in hits[0]["legs"]
    for hit in hits:
        assert hit["legs"]
        assert start <= datetime.fromisoformat(hit["createdAt"]) < end


def test_search_is_lexical_and_says_so_before_any_embedding(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]  # the default fixtures run no indexer
    scripted.then(speak("Noted."))
    chat(client, agent_id, "My cat is called Tama")
    found = client.post(f"/api/agents/{agent_id}/memory/search", json={"query": "cat Tama"})
    assert found.headers["x-memory-search"] == (
        "lexical only: this agent's memory has no vectors yet"
    )
    assert [(h["content"], h["legs"]) for h in found.json()] == [
        ("My cat is called Tama", ["lexical"])
    ]
    shown = client.get(f"/api/agents/{agent_id}/memory/index").json()
    assert shown["embedded"] == 0
    assert shown["total"] >= 1
    assert shown["text"].startswith("embedded 0 of ")

    config = client.get(f"/api/agents/{agent_id}/llm/config").json()
    config["models"]["embedding"] = {"provider": "ollama", "model": "nomic-embed-text"}
    assert client.put(f"/api/agents/{agent_id}/llm/config", json=config).status_code == 200
    assert client.get(f"/api/agents/{agent_id}/memory/index").json()["model"] == (
        "ollama/nomic-embed-text"
    )
    missing = client.get("/api/agents/00000000-0000-4000-8000-000000000000/memory/index")
    assert missing.status_code == 404
