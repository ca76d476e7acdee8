"""`opencrab up`'s app in process with the schedules running, on SQLite and on
PostgreSQL, its model the fake OpenAI server (real wire format)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings, load_settings
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Recorded, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.server.local import LocalClient

_ids = count(1)


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion calling one action."""
    call = {
        "id": f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return completion({"content": None, "tool_calls": [call]}, finish="tool_calls")


def wait_for(what: str, done: Callable[[], Any], secs: float = 90) -> Any:
    """Poll `done` until it returns something true (gives up after `secs`)."""
    deadline = time.monotonic() + secs
    while not (found := done()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
    return found


def echo(request: Recorded) -> Reply:
    """A reply naming the prompt it answers (the last user message)."""
    said = [m for m in request.json["messages"] if m["role"] == "user"]
    text = said[-1]["content"] if said else ""
    if isinstance(text, list):
        text = " ".join(part.get("text", "") for part in text)
    return Reply(json=completion({"content": f"done: {text}"}))


@pytest.fixture
def schedule_settings(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, fake_llm_server: FakeLlmServer
) -> Settings:
    """Schedules a second apart allowed, changes read every 0.2 s, the fake model wired."""
    monkeypatch.setenv("OPENCRAB_SCHEDULES__MIN_INTERVAL_SECS", "1")
    monkeypatch.setenv("OPENCRAB_SCHEDULES__REFRESH_SECS", "0.2")
    monkeypatch.setenv("OPENCRAB_DATABASE__LEASE_TTL_SECS", "3")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    return load_settings()


@pytest.fixture
def app_db(schedule_settings: Settings, any_db: Database) -> Database:
    return any_db


@pytest.fixture
def api(schedule_settings: Settings, app_db: Database) -> Iterator[TestClient]:
    """The app with the schedules running (no heartbeats, no tickets)."""
    with LocalClient(create_app(schedule_settings, app_db, schedules=True)) as client:
        yield client


@pytest.fixture
def agent(api: TestClient) -> str:
    body = {"name": "aki", "prompt": "You are terse.", "heartbeat": {"enabled": False}}
    made = api.post("/api/agents", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def runs(api: TestClient, schedule_id: str) -> list[dict[str, Any]]:
    """The schedule's runs, oldest slot first."""
    found = api.get(f"/api/schedules/{schedule_id}/runs", params={"limit": 1000})
    assert found.status_code == 200, found.text
    return sorted(found.json(), key=lambda r: r["slot"])


__all__ = ["CHAT", "echo", "runs", "tool_call", "wait_for"]
