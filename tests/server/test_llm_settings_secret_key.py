"""A missing or replaced `secret.key` (issue 31, "Also" 5): the settings API and page
say the stored key cannot be decrypted (never "hasKey: true"), storing a key is refused
with the reason (409, not 500) and keeps every stored row, and a call to the provider
fails saying what to do."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from opencrab.config.loader import load_settings
from opencrab.config.secret_key import FILE_NAME
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.repositories import llm_settings as repo
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.server.conftest import error_of
from tests.server.local import LocalClient

CHAT = "/v1/chat/completions"
KEY = "sk-or-v1-stored-before-the-key-went-AB12"
AGAIN = "sk-or-v1-entered-again-after-it-went-CD34"
ANTHROPIC_KEY = "sk-ant-a-second-provider-EF56"


@pytest.fixture
def llm(fake_llm_server: FakeLlmServer) -> FakeLlmServer:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    return fake_llm_server


def serve(db: Database) -> Iterator[TestClient]:
    with LocalClient(create_app(load_settings(), db)) as client:
        yield client


def openrouter(client: TestClient) -> dict[str, object]:
    providers = client.get("/api/llm/settings").json()["providers"]
    return dict(next(p for p in providers if p["name"] == "openrouter"))


def stored(db: Database) -> dict[str, str | None]:
    with db.read() as conn:
        return {n: r.api_key_encrypted for n, r in repo.providers(conn).items()}


@pytest.fixture
def key_stored(db: Database, llm: FakeLlmServer) -> dict[str, str | None]:
    for client in serve(db):
        body = {"baseUrl": llm.url + "/v1", "apiKey": KEY}
        assert client.patch("/api/llm/providers/openrouter", json=body).status_code == 200
    return stored(db)


def replace_key(data_dir: Path) -> None:
    (data_dir / FILE_NAME).write_bytes(Fernet.generate_key())


def delete_key(data_dir: Path) -> None:
    os.remove(data_dir / FILE_NAME)


@pytest.mark.parametrize("lose", [replace_key, delete_key], ids=["replaced", "deleted"])
def test_a_lost_secret_key_is_said_and_storing_is_refused(
    lose: object, db: Database, data_dir: Path, key_stored: dict[str, str | None]
) -> None:
    assert callable(lose)
    lose(data_dir)
    for client in serve(db):
        view = openrouter(client)
        assert view["hasKey"] is False
        assert "cannot be decrypted" in str(view["keyProblem"])
        assert "OPENCRAB_SECRET_KEY" in str(view["keyProblem"])
        assert view["keyLast4"] == "AB12"  # which key it was, so the user knows what to enter

        page = client.get("/settings/llm")
        assert page.status_code == 200
        assert "cannot be decrypted" in page.text
        assert "key ••••AB12</span>" not in page.text

        tested = client.post("/api/llm/providers/openrouter/test").json()
        assert tested["ok"] is False
        assert "cannot be decrypted" in tested["error"]
        assert "OPENCRAB_SECRET_KEY" in tested["error"]
        assert "enter the key again" in tested["error"]

        refused = client.patch("/api/llm/providers/anthropic", json={"apiKey": ANTHROPIC_KEY})
        message = error_of(refused, 409, "conflict")
        assert "openrouter" in message
        assert "OPENCRAB_SECRET_KEY" in message
    assert stored(db) == key_stored  # nothing stored, nothing lost


@pytest.mark.parametrize("lose", [replace_key, delete_key], ids=["replaced", "deleted"])
def test_entering_the_only_stored_key_again_works(
    lose: object,
    db: Database,
    data_dir: Path,
    llm: FakeLlmServer,
    key_stored: dict[str, str | None],
) -> None:
    assert callable(lose)
    lose(data_dir)
    for client in serve(db):
        again = client.patch("/api/llm/providers/openrouter", json={"apiKey": AGAIN})
        assert again.status_code == 200, again.text
        assert (again.json()["hasKey"], again.json()["keyProblem"]) == (True, None)
        assert client.post("/api/llm/providers/openrouter/test").json()["ok"] is True
        assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {AGAIN}"
        # the key in use now decrypts every stored key: a second provider may be stored
        added = client.patch("/api/llm/providers/anthropic", json={"apiKey": ANTHROPIC_KEY})
        assert added.status_code == 200, added.text


def test_a_key_file_that_is_no_key_is_said_and_storing_is_refused(
    db: Database, data_dir: Path, key_stored: dict[str, str | None]
) -> None:
    (data_dir / FILE_NAME).write_bytes(b"not a fernet key")
    for client in serve(db):
        view = openrouter(client)
        assert view["hasKey"] is False
        assert "cannot be decrypted" in str(view["keyProblem"])
        refused = client.patch("/api/llm/providers/openrouter", json={"apiKey": AGAIN})
        assert "not a Fernet key" in error_of(refused, 409, "conflict")
    assert stored(db) == key_stored
    assert (data_dir / FILE_NAME).read_bytes() == b"not a fernet key"
