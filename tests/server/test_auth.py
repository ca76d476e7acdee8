"""Bearer tokens: the store (hashed, revocable) and the app with auth on; CORS off by default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from opencrab.auth import TokenStore, hash_token
from opencrab.config import Settings
from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.tables import api_tokens
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of
from tests.server.local import LocalClient


def test_tokens_are_stored_hashed_and_can_be_revoked(db: Database) -> None:
    tokens = TokenStore(db)
    token, secret = tokens.create("dashboard")
    assert secret.startswith("ocb_")
    assert len(secret) > 40
    with db.read() as conn:
        row = conn.execute(sa.select(api_tokens)).one()
    assert row.token_hash == hash_token(secret)
    assert secret not in tuple(str(v) for v in row)
    assert secret.startswith(token.prefix)

    verified = tokens.verify(secret)
    assert verified is not None
    assert verified.id == token.id
    assert tokens.list()[0].last_used_at is not None
    assert tokens.verify(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    assert tokens.verify("Bearer " + secret) is None
    assert tokens.verify("") is None

    with pytest.raises(ConflictError):
        tokens.create("dashboard")
    with pytest.raises(ValidationError):
        tokens.create("bad\nname")
    tokens.revoke("dashboard")
    assert tokens.verify(secret) is None
    assert tokens.has_active() is False
    with pytest.raises(NotFoundError):
        tokens.revoke(token.id)
    again, _ = tokens.create("dashboard")  # the name is free once revoked
    assert tokens.revoke(again.prefix).name == "dashboard"


@pytest.fixture
def secured(settings: Settings, db: Database) -> Iterator[tuple[TestClient, str]]:
    _, secret = TokenStore(db).create("tests")
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai"))
    with LocalClient(create_app(settings, db, router=router, auth=True)) as client:
        yield client, secret


def test_auth_refuses_requests_without_an_active_token(
    secured: tuple[TestClient, str], db: Database
) -> None:
    client, secret = secured
    missing = client.get("/api/agents")
    assert "missing bearer token" in error_of(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = client.get("/api/agents", headers={"Authorization": "Bearer ocb_wrong"})
    assert "invalid or revoked" in error_of(wrong, 401, "unauthorized")
    basic = client.get("/api/agents", headers={"Authorization": "Basic dXNlcjpwdw=="})
    error_of(basic, 401, "unauthorized")
    refused = client.post("/v1/chat/completions", json={})  # OpenAI's shape under /v1
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert "missing bearer token" in refused.json()["error"]["message"]

    headers = {"Authorization": f"Bearer {secret}"}
    assert client.get("/api/agents", headers=headers).status_code == 200
    made = client.post("/api/agents", json={"name": "a", "prompt": "p"}, headers=headers)
    assert made.status_code == 201
    assert client.get("/api/health").status_code == 200  # stays open
    assert client.get("/openapi.json").status_code == 200

    TokenStore(db).revoke("tests")
    error_of(client.get("/api/agents", headers=headers), 401, "unauthorized")


def test_the_spec_documents_the_bearer_scheme(secured: tuple[TestClient, str]) -> None:
    client, _ = secured
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    list_agents = spec["paths"]["/api/agents"]["get"]
    assert list_agents["security"] == [{"bearerAuth": []}]
    assert "401" in list_agents["responses"]
    assert "security" not in spec["paths"]["/api/health"]["get"]


def test_cors_is_off_unless_origins_are_configured(settings: Settings, db: Database) -> None:
    preflight = {
        "Origin": "https://evil.example",
        "Access-Control-Request-Method": "GET",
    }
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai"))
    with LocalClient(create_app(settings, db, router=router)) as client:
        answer = client.options("/api/agents", headers=preflight)
        assert "access-control-allow-origin" not in answer.headers
        plain = client.get("/api/agents", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in plain.headers
    settings.gateway.rest.cors_origins = ["https://dash.example"]
    with LocalClient(create_app(settings, db, router=router)) as client:
        allowed = client.options(
            "/api/agents", headers={**preflight, "Origin": "https://dash.example"}
        )
        assert allowed.headers["access-control-allow-origin"] == "https://dash.example"
        other = client.options("/api/agents", headers=preflight)
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"
