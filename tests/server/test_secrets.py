"""A provider that echoes the API key in its error body: the key is stored nowhere.

The fake OpenAI server answers with an error whose text contains the configured key (as
a misbehaving proxy or provider does). The turn fails as it should; the key must not be
in the database file, the turn's answer, the WebSocket messages, `/api/llm/models` or
the log.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from opencrab.config import load_settings
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.ports import closed_port
from tests.server.conftest import new_agent
from tests.server.local import LocalClient

KEY = "sk-proj-Secr3tKeyThatMustNeverBeStored0123456789"
CHAT = "/v1/chat/completions"


def echoing(status: int) -> Reply:
    message = f"Incorrect API key provided: {KEY}. You can find your key at example.com."
    return Reply(status=status, json={"error": {"message": message, "code": "invalid_api_key"}})


def stored_bytes(data_dir: Path) -> bytes:
    """Every byte of the SQLite database, its WAL included."""
    return b"".join(p.read_bytes() for p in sorted(data_dir.glob("opencrab.db*")))


def test_a_key_echoed_in_a_provider_error_is_never_stored_or_shown(
    fake_llm_server: FakeLlmServer,
    monkeypatch: pytest.MonkeyPatch,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    for local in ("OLLAMA", "LLAMACPP"):
        url = f"http://127.0.0.1:{closed_port()}"
        monkeypatch.setenv(f"OPENCRAB_LLM__PROVIDERS__{local}__BASE_URL", url)
    settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    seen: list[Any] = []
    with LocalClient(create_app(settings, db)) as client:
        agent_id = new_agent(client)["id"]
        session_id = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]

        fake_llm_server.reply(CHAT, echoing(401))  # refused: raised at once
        turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": "hi"})
        assert turn.status_code == 201, turn.text
        error = turn.json()["turn"]["error"]
        assert "Incorrect API key provided" in error  # the reason stays readable
        seen.append(turn.text)

        fake_llm_server.reply(CHAT, echoing(500))  # retryable: recorded, then raised
        with client.websocket_connect("/api/ws") as ws:
            ws.send_json({"type": "chat", "agent": agent_id, "content": "again"})
            while True:
                message = ws.receive_json()
                seen.append(message)
                if message["type"] in ("chat.done", "error"):
                    break
        assert "Incorrect API key provided" in str(seen[-1])

        fake_llm_server.reply("/v1/models", echoing(403))
        models = client.get("/api/llm/models", params={"provider": "openai"})
        assert "Incorrect API key provided" in models.text
        seen.append(models.text)
        seen.append(client.get(f"/api/sessions/{session_id}/messages").text)
        trace_id = turn.json()["turn"]["traceId"]
        events = client.get(f"/api/traces/{trace_id}/events")
        assert "Incorrect API key provided" in events.text
        seen.append(events.text)
    assert len(fake_llm_server.requests_to(CHAT)) >= 2  # the provider was really called
    assert KEY not in str(seen)
    assert KEY.encode() not in stored_bytes(data_dir)
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert KEY not in logged
    assert "<redacted>" in str(seen)


def test_every_configured_secret_is_redacted_in_each_written_form(data_dir: Path) -> None:
    from opencrab.config.secrets import Redactor

    settings = load_settings(
        overrides={
            "llm": {"providers": {"anthropic": {"api_key": "sk-ant-α/key+1"}}},
            "gateway": {"discord": {"token": "discord.token.value"}},
            "database": {"url": "postgresql://crab:pg-pass-word@db.example/opencrab"},
        }
    )
    redactor = Redactor.from_settings(settings)
    text = (
        'key sk-ant-α/key+1, json "sk-ant-\\u03b1\\/key+1" or "sk-ant-\\u03b1/key+1", '
        "url sk-ant-%CE%B1%2Fkey%2B1, discord.token.value, pg-pass-word, crab"
    )
    assert redactor.redact(text) == (
        'key <redacted>, json "<redacted>" or "<redacted>", '
        "url <redacted>, <redacted>, <redacted>, crab"
    )
