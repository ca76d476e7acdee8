"""The connection test of the LLM settings (POST /api/llm/providers/{name}/test) respects
the caps: its call goes through the router's budget guard like any other, so a spent
fleet cap, or a default model with no price under one, refuses it before a request
reaches the provider (the fake OpenAI server counts them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from opencrab.config.loader import load_settings
from opencrab.llm.pricing import ModelPrice, save_price
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.server.local import LocalClient

CHAT = "/v1/chat/completions"


@pytest.fixture
def llm(fake_llm_server: FakeLlmServer) -> FakeLlmServer:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    return fake_llm_server


@contextmanager
def client_with(
    monkeypatch: pytest.MonkeyPatch, llm: FakeLlmServer, fleet_daily_usd: float, priced: bool
) -> Iterator[TestClient]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-openai-key-1234")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", llm.url + "/v1")
    monkeypatch.setenv("OPENCRAB_BUDGETS__FLEET_DAILY_USD", str(fleet_daily_usd))
    settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    if priced:
        with db.write() as conn:
            save_price(conn, ModelPrice("openai", "gpt-4o", 2.5, 10.0))
    try:
        with LocalClient(create_app(settings, db)) as client:
            yield client
    finally:
        db.close()


@pytest.mark.parametrize(
    ("cap", "priced", "why"),
    [
        (5.0, False, "openai/gpt-4o has no price, so under the fleet's cap"),
        (0.0, True, "the fleet has spent $0.0000 of its $0.00 daily budget"),
    ],
)
def test_the_connection_test_is_refused_by_the_caps_before_any_request(
    monkeypatch: pytest.MonkeyPatch, llm: FakeLlmServer, cap: float, priced: bool, why: str
) -> None:
    with client_with(monkeypatch, llm, cap, priced) as client:
        tested = client.post("/api/llm/providers/openai/test")
        assert tested.status_code == 200, tested.text
        body = tested.json()
        assert body["ok"] is False
        assert body["error"].startswith(why)
        assert llm.requests_to(CHAT) == []


def test_the_connection_test_runs_when_its_estimate_fits_the_cap(
    monkeypatch: pytest.MonkeyPatch, llm: FakeLlmServer
) -> None:
    with client_with(monkeypatch, llm, 1.0, True) as client:
        tested = client.post("/api/llm/providers/openai/test")
        assert tested.json()["ok"] is True, tested.text
        assert len(llm.requests_to(CHAT)) == 1
