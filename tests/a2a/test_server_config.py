"""`[a2a]` (opencrab.config.a2a): when the A2A routes are served, which agents they
publish, which one the root card describes, and the config errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from opencrab.config import Settings
from opencrab.config.a2a import A2aSection
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.server.local import LocalClient

CARD = "/.well-known/agent-card.json"


def test_it_is_on_by_default_on_loopback_only() -> None:
    auto = A2aSection()
    assert [auto.serves(h) for h in ("127.0.0.1", "::1", "localhost")] == [True] * 3
    assert [auto.serves(h) for h in ("0.0.0.0", "192.168.1.5", "crab.example")] == [False] * 3
    assert A2aSection(enabled=True).serves("0.0.0.0")
    assert not A2aSection(enabled=False).serves("127.0.0.1")


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"publish": [" "]}, "publish"),
        ({"publish": "aki"}, "publish"),
        ({"poll_secs": 0}, "poll_secs"),
        ({"ticket_wait_secs": -1}, "ticket_wait_secs"),
        ({"default": "aki"}, "default"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(table: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        A2aSection.model_validate(table)


def _client(settings: Settings, db: Database) -> Iterator[TestClient]:
    with LocalClient(create_app(settings, db)) as client:
        for name in ("aki", "bo", "cy"):
            made = client.post("/api/agents", json={"name": name, "prompt": "Help."})
            assert made.status_code == 201, made.text
        yield client


@pytest.fixture
def published(settings: Settings, db: Database) -> Iterator[TestClient]:
    settings.a2a = A2aSection(publish=["bo", "cy"], default_agent="cy")
    yield from _client(settings, db)


def test_only_published_agents_are_served_and_the_default_is_chosen(
    published: TestClient,
) -> None:
    assert published.get(f"/a2a/aki{CARD}").status_code == 404
    assert published.post("/a2a/aki", json={}).status_code == 404
    assert published.get(f"/a2a/bo{CARD}").json()["name"] == "bo"
    root = published.get(CARD).json()
    assert root["name"] == "cy"
    (listing,) = root["capabilities"]["extensions"]
    assert [a["name"] for a in listing["params"]["agents"]] == ["bo", "cy"]


def test_off_means_no_a2a_routes(settings: Settings, db: Database) -> None:
    settings.a2a = A2aSection(enabled=False)
    for client in _client(settings, db):
        assert client.get(CARD).status_code == 404
        assert client.get(f"/a2a/aki{CARD}").status_code == 404
