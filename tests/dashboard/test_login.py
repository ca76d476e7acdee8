"""Signing in to the dashboard: the cookie carries a revocable sign-in, never the token;
signing out or revoking the token ends it on the server at once, open WebSockets too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from opencrab.auth import Scope, TokenStore, hash_token
from opencrab.config import Settings
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.server.auth import SESSION_COOKIE
from opencrab.store import Database
from opencrab.store.tables import login_sessions
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.sockets import ping_until_closed
from tests.server.local import ORIGIN, LocalClient

SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin", "Origin": ORIGIN}


@pytest.fixture
def guarded(settings: Settings, db: Database) -> Iterator[tuple[TestClient, str]]:
    """An app requiring tokens with the dashboard on, and an admin token's secret."""
    settings.dashboard.enabled = True
    _, secret = TokenStore(db).create("browser")
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai"))
    with LocalClient(create_app(settings, db, router=router, auth=True)) as client:
        yield client, secret


def sign_in(client: TestClient, secret: str) -> str:
    """Post the login form as the browser does; the cookie's value."""
    answer = client.post(
        "/login",
        data={"token": secret, "next": "/"},
        headers=SAME_ORIGIN,
        follow_redirects=False,
    )
    assert answer.status_code == 303, answer.text
    cookie = answer.cookies.get(SESSION_COOKIE)
    assert cookie
    client.cookies.clear()  # each request below names the cookie it sends
    return str(cookie)


def with_cookie(value: str) -> dict[str, str]:
    return {"Cookie": f"{SESSION_COOKIE}={value}"}


def test_the_sign_in_page_offers_no_sign_out(guarded: tuple[TestClient, str]) -> None:
    """Nobody is signed in on the sign-in page: its top bar has no Sign out button; a
    signed-in page has one."""
    client, secret = guarded
    page = client.get("/login")
    assert page.status_code == 200
    assert 'action="/logout"' not in page.text
    cookie = sign_in(client, secret)
    assert 'action="/logout"' in client.get("/", headers=with_cookie(cookie)).text


def test_the_cookie_is_a_sign_in_not_the_token(
    guarded: tuple[TestClient, str], db: Database
) -> None:
    client, secret = guarded
    cookie = sign_in(client, secret)
    assert cookie != secret
    assert secret not in cookie
    assert TokenStore(db).verify(cookie) is None  # no use as a bearer token
    with db.read() as conn:
        rows = conn.execute(sa.select(login_sessions)).all()
    assert [r.session_hash for r in rows] == [hash_token(cookie)]  # only its hash is kept
    assert cookie not in {str(v) for v in rows[0]}
    assert client.get("/api/agents", headers=with_cookie(cookie)).status_code == 200
    page = client.get("/", headers=with_cookie(cookie), follow_redirects=False)
    assert page.status_code == 200


def test_after_sign_out_the_old_cookie_is_refused(guarded: tuple[TestClient, str]) -> None:
    client, secret = guarded
    cookie = sign_in(client, secret)
    other = sign_in(client, secret)  # the same token in another browser
    out = client.post(
        "/logout", headers={**SAME_ORIGIN, **with_cookie(cookie)}, follow_redirects=False
    )
    assert out.status_code == 303
    assert out.headers["location"] == "/login"
    api = client.get("/api/agents", headers=with_cookie(cookie))
    assert api.status_code == 401
    assert api.json()["error"] == "unauthorized"
    page = client.get("/", headers=with_cookie(cookie), follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"].startswith("/login?next=")
    assert client.get("/api/agents", headers=with_cookie(other)).status_code == 200
    assert (
        client.get("/api/agents", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    )


def test_revoking_the_token_ends_its_sign_ins_and_their_websockets(
    guarded: tuple[TestClient, str], db: Database
) -> None:
    client, secret = guarded
    cookie = sign_in(client, secret)
    with client.websocket_connect("/api/ws", headers=with_cookie(cookie)) as ws:
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}
        TokenStore(db).revoke("browser")  # `opencrab token revoke browser`, any process
        closed = ping_until_closed(ws)
    assert closed.code == 4401
    assert client.get("/api/agents", headers=with_cookie(cookie)).status_code == 401
    with db.read() as conn:
        assert conn.execute(sa.select(login_sessions.c.ended_at)).scalar_one() is not None


def test_signing_out_closes_the_websockets_of_that_sign_in(
    guarded: tuple[TestClient, str],
) -> None:
    client, secret = guarded
    cookie = sign_in(client, secret)
    other = sign_in(client, secret)
    with (
        client.websocket_connect("/api/ws", headers=with_cookie(cookie)) as ended,
        client.websocket_connect("/api/ws", headers=with_cookie(other)) as kept,
    ):
        for ws in (ended, kept):
            ws.send_json({"type": "ping"})
            assert ws.receive_json() == {"type": "pong"}
        client.post("/logout", headers={**SAME_ORIGIN, **with_cookie(cookie)})
        closed = ping_until_closed(ended)
        assert closed.code == 4401
        kept.send_json({"type": "ping"})
        assert kept.receive_json() == {"type": "pong"}


def test_a_sign_in_keeps_its_tokens_scope(settings: Settings, db: Database) -> None:
    settings.dashboard.enabled = True
    _, secret = TokenStore(db).create("viewer", Scope.read)
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai"))
    with LocalClient(create_app(settings, db, router=router, auth=True)) as client:
        cookie = sign_in(client, secret)
        assert client.get("/api/agents", headers=with_cookie(cookie)).status_code == 200
        made = client.post(
            "/api/agents",
            json={"name": "a", "prompt": "p"},
            headers={**SAME_ORIGIN, **with_cookie(cookie)},
        )
        assert made.status_code == 403
        assert "this token's scope is 'read'" in made.json()["message"]
