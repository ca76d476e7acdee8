"""LLM settings over REST: encrypted keys, precedence, live apply, audit, connection test.

The app runs its own router built from the config (real providers) against the fake
OpenAI-wire server; OpenRouter speaks that wire format too, so a key set for it through
the API is seen by the fake server in the Authorization header of the next call.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.config.loader import load_settings
from opencrab.config.secret_key import FILE_NAME
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.server.conftest import error_of
from tests.server.local import LocalClient

CHAT = "/v1/chat/completions"
ENV_KEY = "sk-env-openai-key-1234"
KEY = "sk-or-v1-first-secret-AB12"
NEW_KEY = "sk-or-v1-second-secret-CD34"


def make_client(settings: Settings) -> Iterator[TestClient]:
    db = Database(settings.database_url)
    db.upgrade()
    try:
        with LocalClient(create_app(settings, db)) as client:
            yield client
    finally:
        db.close()


@pytest.fixture
def llm(fake_llm_server: FakeLlmServer) -> FakeLlmServer:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    return fake_llm_server


@pytest.fixture
def env_settings(monkeypatch: pytest.MonkeyPatch, llm: FakeLlmServer) -> Settings:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", llm.url + "/v1")
    return load_settings()


@pytest.fixture
def client(env_settings: Settings) -> Iterator[TestClient]:
    yield from make_client(env_settings)


def provider(client: TestClient, name: str) -> dict[str, object]:
    response = client.get("/api/llm/settings")
    assert response.status_code == 200, response.text
    return next(p for p in response.json()["providers"] if p["name"] == name)


def set_openrouter(client: TestClient, llm: FakeLlmServer, key: str) -> dict[str, object]:
    response = client.patch(
        "/api/llm/providers/openrouter", json={"baseUrl": llm.url + "/v1", "apiKey": key}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_key_is_applied_at_once_encrypted_and_never_returned(
    client: TestClient, llm: FakeLlmServer, data_dir: Path
) -> None:
    body = set_openrouter(client, llm, KEY)
    assert body["hasKey"] is True
    assert body["keyLast4"] == "AB12"
    assert body["keySource"] == {"kind": "dashboard", "label": "dashboard", "locked": False}

    tested = client.post("/api/llm/providers/openrouter/test")
    assert tested.status_code == 200, tested.text
    assert tested.json()["ok"] is True
    assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"

    set_openrouter(client, llm, NEW_KEY)  # no restart: the next call uses the new key
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True
    assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {NEW_KEY}"

    for path in ("/api/llm/settings", "/api/llm/settings/audit", "/openapi.json"):
        text = client.get(path).text
        assert KEY not in text
        assert NEW_KEY not in text
    assert provider(client, "openrouter")["keyLast4"] == "CD34"

    raw = b"".join(p.read_bytes() for p in data_dir.glob("opencrab.db*"))
    assert raw  # the database file (and its WAL) were read
    assert KEY.encode() not in raw
    assert NEW_KEY.encode() not in raw
    key_file = data_dir / FILE_NAME
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_every_change_is_audited_without_the_secret(client: TestClient, llm: FakeLlmServer) -> None:
    set_openrouter(client, llm, KEY)
    assert client.patch("/api/llm/providers/google", json={"enabled": False}).status_code == 200
    assert client.put("/api/llm/aliases/mine", json={"provider": "openrouter", "model": "x/y"})
    assert client.delete("/api/llm/aliases/mine").status_code == 204
    assert (
        client.put("/api/llm/fallback", json={"chain": ["openrouter", "fast"]}).status_code == 200
    )

    rows = client.get("/api/llm/settings/audit").json()
    seen = [(r["actor"], r["target"], r["action"], r["detail"]) for r in reversed(rows)]
    assert seen == [
        ("local", "providers.openrouter.base_url", "set", llm.url + "/v1"),
        ("local", "providers.openrouter.api_key", "set", "…AB12"),
        ("local", "providers.google.enabled", "set", "False"),
        ("local", "aliases.mine", "set", "openrouter/x/y"),
        ("local", "aliases.mine", "remove", ""),
        ("local", "fallback.chain", "set", "openrouter > fast"),
    ]
    assert all(r["at"] for r in rows)


def test_values_from_the_environment_are_shown_as_such_and_not_overridden(
    client: TestClient,
) -> None:
    openai = provider(client, "openai")
    assert openai["keySource"] == {
        "kind": "environment",
        "label": "environment OPENAI_API_KEY",
        "locked": True,
    }
    assert openai["keyLast4"] == "1234"
    assert openai["baseUrlSource"]["label"] == (
        "environment OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL"
    )
    refused = client.patch("/api/llm/providers/openai", json={"apiKey": "sk-dashboard-9999"})
    assert "OPENAI_API_KEY" in error_of(refused, 409, "conflict")
    refused = client.patch("/api/llm/providers/openai", json={"baseUrl": "http://x.example/v1"})
    assert "OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL" in error_of(refused, 409, "conflict")
    assert client.get("/api/llm/settings/audit").json() == []  # nothing was changed
    # a packaged value (no user layer) is the dashboard's to change
    assert provider(client, "openrouter")["baseUrlSource"]["kind"] == "packaged"


def test_values_from_the_config_file_are_refused_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llm: FakeLlmServer
) -> None:
    config = tmp_path / "mine.toml"
    config.write_text(
        '[llm.fallback]\nchain = ["ollama"]\n'
        '[llm.aliases]\nteam = { provider = "ollama", model = "qwen3:8b" }\n',
        encoding="utf-8",
    )
    settings = load_settings(config)
    for client in make_client(settings):
        refused = client.put("/api/llm/fallback", json={"chain": ["openai"]})
        assert str(config) in error_of(refused, 409, "conflict")
        refused = client.put("/api/llm/aliases/team", json={"provider": "google", "model": "m"})
        assert str(config) in error_of(refused, 409, "conflict")
        view = client.get("/api/llm/settings").json()
        assert view["fallback"] == {
            "chain": ["ollama"],
            "source": {"kind": "file", "label": str(config), "locked": True},
        }
        team = next(a for a in view["aliases"] if a["alias"] == "team")
        assert team["source"]["kind"] == "file"
        # a packaged alias is editable, and the router uses the edit at once
        changed = client.put("/api/llm/aliases/fast", json={"provider": "google", "model": "g1"})
        assert changed.json()["source"]["kind"] == "dashboard"
        router = client.app.state.runtime.router  # type: ignore[attr-defined]
        fast = router.aliases["fast"]  # the planner reads the same dict
        assert (fast.provider, fast.model) == ("google", "g1")
        assert router.planner.aliases is router.aliases


def test_a_failing_connection_reports_the_redacted_error(
    client: TestClient, llm: FakeLlmServer
) -> None:
    set_openrouter(client, llm, KEY)
    llm.reset()
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    llm.reply(CHAT, Reply(status=401, json=echo))
    tested = client.post("/api/llm/providers/openrouter/test")
    assert tested.status_code == 200, tested.text
    body = tested.json()
    assert body["ok"] is False
    assert KEY not in body["error"]
    assert "<redacted>" in body["error"]
    assert "401" in body["error"] or "auth" in body["error"].lower()
    usage = client.get("/api/llm/monitoring", params={"period": "day"}).json()
    row = next(p for p in usage["providers"] if p["provider"] == "openrouter")
    assert (row["calls"], row["errors"], row["errorRate"]) == (1, 1, 1.0)
    assert KEY not in client.get("/api/llm/monitoring").text


def test_monitoring_counts_calls_latency_and_cost(client: TestClient, llm: FakeLlmServer) -> None:
    set_openrouter(client, llm, KEY)
    for _ in range(3):
        assert client.post("/api/llm/providers/openrouter/test").json()["ok"]
    llm.reset()
    llm.reply(CHAT, Reply(status=500, json={"error": {"message": "down"}}))
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is False
    usage = client.get("/api/llm/monitoring").json()
    row = next(p for p in usage["providers"] if p["provider"] == "openrouter")
    assert (row["calls"], row["errors"], row["errorRate"]) == (4, 1, 0.25)
    assert row["p50LatencyMs"] is not None
    assert row["maxLatencyMs"] >= row["p50LatencyMs"]
    assert (usage["calls"], usage["errors"]) == (4, 1)


def test_an_unreadable_secret_key_is_a_clear_error_and_keeps_the_rows(
    env_settings: Settings, llm: FakeLlmServer, data_dir: Path
) -> None:
    for client in make_client(env_settings):
        set_openrouter(client, llm, KEY)
    (data_dir / FILE_NAME).write_bytes(b"not a fernet key")
    for client in make_client(env_settings):  # starts; the stored key is left unused
        view = provider(client, "openrouter")
        assert view["keyLast4"] == "AB12"  # the row is still there
        refused = client.post("/api/llm/providers/openrouter/test").json()
        assert refused["ok"] is False
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        assert any("not a Fernet key" in n and "openrouter" in n for n in runtime.notices)
    os.remove(data_dir / FILE_NAME)
    for client in make_client(env_settings):  # a missing key file never makes a new key
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        assert any("key file is missing" in n for n in runtime.notices)
        failed = client.patch("/api/llm/providers/anthropic", json={"apiKey": "sk-ant-12345678"})
        assert "key file is missing" in error_of(failed, 409, "conflict")
    assert not (data_dir / FILE_NAME).exists()


def test_the_secret_key_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, env_settings: Settings, llm: FakeLlmServer, data_dir: Path
) -> None:
    from cryptography.fernet import Fernet

    monkeypatch.setenv("OPENCRAB_SECRET_KEY", Fernet.generate_key().decode())
    for client in make_client(env_settings):
        set_openrouter(client, llm, KEY)
    assert not (data_dir / FILE_NAME).exists()
    for client in make_client(env_settings):  # after a restart the stored key works
        assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True
        assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"


def test_bad_input_is_refused_with_the_reason(client: TestClient) -> None:
    bad = client.patch("/api/llm/providers/openrouter", json={"apiKey": "has space 1234"})
    assert "no spaces" in error_of(bad, 400, "validation_error")
    bad = client.patch("/api/llm/providers/openrouter", json={"baseUrl": "ftp://x"})
    assert "http(s)" in error_of(bad, 400, "validation_error")
    bad = client.patch("/api/llm/providers/ollama", json={"apiKey": "sk-12345678"})
    assert "takes no API key" in error_of(bad, 400, "validation_error")
    assert client.patch("/api/llm/providers/nope", json={"enabled": True}).status_code == 404
    bad = client.put("/api/llm/fallback", json={"chain": ["nowhere"]})
    assert "nowhere" in error_of(bad, 400, "validation_error")
    bad = client.put("/api/llm/aliases/fast", json={"provider": "nope", "model": "m"})
    assert "unknown provider" in error_of(bad, 400, "validation_error")
    assert client.get("/api/llm/settings/audit").json() == []


def test_a_disabled_provider_is_dropped_from_the_router_at_once(
    client: TestClient, llm: FakeLlmServer
) -> None:
    set_openrouter(client, llm, KEY)
    router = client.app.state.runtime.router  # type: ignore[attr-defined]
    assert "openrouter" in router.providers
    assert "openrouter" in router.usable
    assert client.patch("/api/llm/providers/openrouter", json={"enabled": False}).status_code == 200
    assert "openrouter" not in router.providers
    assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is False
    assert provider(client, "openrouter")["enabled"] is False


def test_a_stored_key_is_redacted_from_log_lines(
    client: TestClient, llm: FakeLlmServer, caplog: pytest.LogCaptureFixture
) -> None:
    set_openrouter(client, llm, KEY)
    logging.getLogger("opencrab.somewhere").error("provider said: bad key %s", KEY)
    try:
        raise RuntimeError(f"echoed {KEY}")
    except RuntimeError:
        logging.getLogger("opencrab.somewhere").exception("failed")
    assert "provider said: bad key <redacted>" in caplog.text
    assert "echoed <redacted>" in caplog.text
    assert KEY not in caplog.text
