"""An in-process app over a real SQLite store, its LLM calls answered by a script."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.local import LocalClient


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai")  # each test queues its replies


@pytest.fixture
def client(settings: Settings, db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as c:
        yield c


def error_of(response: Any, status: int, code: str) -> str:
    """The message of an error response, after checking its status, code and shape."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == code
    return str(body["message"])


def new_agent(client: TestClient, name: str = "aki", **extra: Any) -> dict[str, Any]:
    response = client.post("/api/agents", json={"name": name, "prompt": "Be brief.", **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())
