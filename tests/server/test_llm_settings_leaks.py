"""A key stored in the dashboard appears nowhere settings are shown: neither in clear
nor encrypted, in no JSON route, dashboard page, CLI output or log line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.config.loader import load_settings
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.repositories import llm_settings as repo
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.server.local import LocalClient

CHAT = "/v1/chat/completions"
KEY = "sk-or-v1-never-shown-secret-EF56"


def leaked(text: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s in text]


def test_a_stored_key_is_in_no_output(
    fake_llm_server: FakeLlmServer, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    try:
        with LocalClient(create_app(settings, db)) as client:
            stored = client.patch(
                "/api/llm/providers/openrouter",
                json={"apiKey": KEY, "baseUrl": fake_llm_server.url + "/v1"},
            )
            assert stored.status_code == 200, stored.text
            with db.read() as conn:
                encrypted = repo.providers(conn)["openrouter"].api_key_encrypted
            assert encrypted
            assert KEY not in encrypted
            secrets = [KEY, encrypted]
            assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True
            agent = client.post("/api/agents", json={"name": "aki", "prompt": "Be brief."}).json()
            paths = [
                p
                for p, ops in client.get("/openapi.json").json()["paths"].items()
                if "get" in ops and "{" not in p
            ]
            assert "/api/llm/settings" in paths
            paths += [
                f"/api/agents/{agent['id']}",
                f"/api/agents/{agent['id']}/llm/config",
                "/api/llm/providers?probe=true",
                "/api/analytics/llm/export?format=csv",
                "/openapi.json",
                "/settings/llm",
                "/costs",
            ]
            for path in paths:
                response = client.get(path)
                assert response.status_code < 500, (path, response.text)
                assert leaked(response.text, secrets) == [], path
    finally:
        db.close()

    fake_llm_server.reset()  # what follows is the CLI's own calls
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    runner = CliRunner()
    app = build_app()
    for args in (
        ["config", "show"],
        ["config", "show", "--json"],
        ["llm", "models", "--json"],
        ["llm", "health"],
        ["llm", "chat", "--json", "-m", "openrouter/m1", "ping"],
        ["llm", "metrics"],
        ["db", "current"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert leaked(result.output, secrets) == [], args
    # the CLI used the stored key: it was read, decrypted and sent, and shown nowhere
    assert len(fake_llm_server.requests_to(CHAT)) == 1
    assert fake_llm_server.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"
    assert leaked(caplog.text, secrets) == []
