"""A hostile web page against the loopback server: DNS rebinding and cross-site requests.

The attacks a page the operator visits can make on `http://127.0.0.1:8080` with no
token: rebind its own name to 127.0.0.1 (every request then carries `Host: evil.example`),
post a plain form or a `fetch(…, {mode: "no-cors"})` at a route that changes state (CSRF),
or open the WebSocket from its own origin.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from opencrab.config import Settings, load_settings
from opencrab.errors import ConfigError
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.ports import closed_port, free_port
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.served import create_token, start_up, stop_up
from tests.server.conftest import error_of, new_agent
from tests.server.local import ORIGIN, LocalClient

EVIL = "http://evil.example"


def served(settings: Settings, db: Database) -> LocalClient:
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", "Hello."))
    return LocalClient(create_app(settings, db, router=router))


@pytest.fixture
def client(settings: Settings, db: Database) -> Iterator[LocalClient]:
    with served(settings, db) as c:
        yield c


def first_skill(client: TestClient, agent_id: str) -> dict[str, Any]:
    skills = client.get(f"/api/agents/{agent_id}/skills").json()
    return dict(skills[0])


# ------------------------------------------------------------------ DNS rebinding
def test_a_rebound_name_is_refused_before_anything_is_read_or_run(client: LocalClient) -> None:
    agent_id = new_agent(client)["id"]
    rebound = {"Host": "evil.example:8080"}
    message = error_of(client.get("/api/agents", headers=rebound), 421, "unknown_host")
    assert "evil.example" in message
    assert "allowed_hosts" in message
    posted = client.post(
        "/api/sessions", json={"agentId": agent_id}, headers={**rebound, "Origin": EVIL}
    )
    error_of(posted, 421, "unknown_host")
    assert client.get("/api/sessions?kind=all").json() == []  # nothing was created
    error_of(client.get("/api/health", headers=rebound), 421, "unknown_host")
    error_of(client.get("/api/agents", headers={"Host": ""}), 400, "bad_request")
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect("/api/ws", headers={**rebound, "Origin": EVIL + ":8080"}),
    ):
        pass
    assert refused.value.code == 4421


def test_the_servers_own_names_are_served(client: LocalClient) -> None:
    for host in ("127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "localhost."):
        response = client.get("/api/agents", headers={"Host": host})
        assert response.status_code == 200, (host, response.text)


def test_the_testclients_default_name_is_refused_too(settings: Settings, db: Database) -> None:
    with TestClient(create_app(settings, db)) as plain:  # Host: testserver
        error_of(plain.get("/api/agents"), 421, "unknown_host")


def test_allowed_hosts_adds_names(data_dir: Any, db: Database) -> None:
    settings = load_settings(
        overrides={"gateway": {"rest": {"allowed_hosts": ["crab.example", "10.1.2.3"]}}}
    )
    with served(settings, db) as client:
        for host in ("crab.example", "CRAB.example:443", "10.1.2.3:8080", "localhost:8080"):
            assert client.get("/api/agents", headers={"Host": host}).status_code == 200, host
        error_of(
            client.get("/api/agents", headers={"Host": "sub.crab.example"}), 421, "unknown_host"
        )


def test_a_bad_allowed_hosts_entry_is_a_config_error(data_dir: Any) -> None:
    for bad in ("http://crab.example", "crab.example/path", "crab.example:80", ""):
        with pytest.raises(ConfigError, match="allowed_hosts"):
            load_settings(overrides={"gateway": {"rest": {"allowed_hosts": [bad]}}})


# ------------------------------------------------------------------ CSRF
def test_a_cross_site_post_changes_nothing(client: LocalClient) -> None:
    agent_id = new_agent(client)["id"]
    skill = first_skill(client, agent_id)
    url = f"/api/agents/{agent_id}/skills/{skill['id']}/toggle"
    # a form or no-cors fetch from another site: no body, no custom header
    modern = {"Origin": EVIL, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    message = error_of(client.post(url, headers=modern), 403, "cross_site_request")
    assert EVIL in message
    assert "cors_origins" in message
    older = {"Origin": EVIL}  # a browser without Sec-Fetch-*
    error_of(client.post(url, headers=older), 403, "cross_site_request")
    sibling = {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}
    error_of(client.post(url, headers=sibling), 403, "cross_site_request")
    form = {**modern, "Content-Type": "application/x-www-form-urlencoded"}
    error_of(client.post(url, content=b"active=false", headers=form), 403, "cross_site_request")
    upload = client.put(
        f"/api/agents/{agent_id}/workspace/planted.txt", content=b"x", headers=modern
    )
    error_of(upload, 403, "cross_site_request")
    error_of(client.post(url, headers={"Origin": "null"}), 403, "cross_site_request")
    assert first_skill(client, agent_id)["isActive"] == skill["isActive"]
    assert client.get(f"/api/agents/{agent_id}/workspace").json()["entries"] == []
    # reading is not a state change: a cross-site GET is answered (and CORS keeps it unread)
    assert client.get(f"/api/agents/{agent_id}/skills", headers=modern).status_code == 200


def test_same_origin_pages_and_non_browser_clients_may_change_state(client: LocalClient) -> None:
    agent_id = new_agent(client)["id"]
    skill = first_skill(client, agent_id)
    url = f"/api/agents/{agent_id}/skills/{skill['id']}/toggle"
    dashboard = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}  # a form on our own page
    assert client.post(url, headers=dashboard).json()["isActive"] is not skill["isActive"]
    older = {"Origin": ORIGIN}
    assert client.post(url, headers=older).json()["isActive"] is skill["isActive"]
    typed = {"Sec-Fetch-Site": "none"}  # the user's own navigation
    assert client.post(url, headers=typed).json()["isActive"] is not skill["isActive"]
    assert client.post(url).json()["isActive"] is skill["isActive"]  # curl, SDKs, the CLI


def test_a_cors_origin_may_post_cross_site(data_dir: Any, db: Database) -> None:
    app_origin = "https://app.example"
    settings = load_settings(overrides={"gateway": {"rest": {"cors_origins": [app_origin]}}})
    with served(settings, db) as client:
        agent_id = new_agent(client)["id"]
        skill = first_skill(client, agent_id)
        url = f"/api/agents/{agent_id}/skills/{skill['id']}/toggle"
        trusted = {"Origin": app_origin, "Sec-Fetch-Site": "cross-site"}
        assert client.post(url, headers=trusted).status_code == 200
        error_of(client.post(url, headers={"Origin": EVIL}), 403, "cross_site_request")


def test_a_cross_site_post_to_v1_gets_openais_error_shape(data_dir: Any, db: Database) -> None:
    settings = load_settings(overrides={"gateway": {"openai_compat": {"enabled": True}}})
    with served(settings, db) as client:
        new_agent(client)
        response = client.post(
            "/v1/chat/completions",
            content=b'{"model": "aki", "messages": [{"role": "user", "content": "hi"}]}',
            headers={"Origin": EVIL, "Content-Type": "text/plain"},
        )
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "cross_site_request"


# ------------------------------------------------------------------ WebSocket origin
@pytest.mark.parametrize(
    "origin",
    [
        EVIL,
        "http://localhost:3000",  # another local service
        "https://127.0.0.1:9999",
        "http://127.0.0.1",  # port 80, not the server's
        "null",
    ],
)
def test_a_websocket_from_another_origin_is_refused(client: LocalClient, origin: str) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect("/api/ws", headers={"Origin": origin}),
    ):
        pass
    assert refused.value.code == 4403


def test_a_websocket_origin_is_never_compared_with_the_host_header(
    data_dir: Any, db: Database
) -> None:
    settings = load_settings(overrides={"gateway": {"rest": {"allowed_hosts": ["crab.example"]}}})
    with served(settings, db) as client:
        # Host is allowed, but the page's origin is on another port than the server's
        headers = {"Host": "crab.example:4000", "Origin": "http://crab.example:4000"}
        with (
            pytest.raises(WebSocketDisconnect) as refused,
            client.websocket_connect("/api/ws", headers=headers),
        ):
            pass
        assert refused.value.code == 4403


@pytest.mark.parametrize(
    "origin", [ORIGIN, "http://localhost:8080", "https://localhost:8080", "http://[::1]:8080"]
)
def test_a_websocket_from_the_servers_own_origin_is_served(
    client: LocalClient, origin: str
) -> None:
    with client.websocket_connect("/api/ws", headers={"Origin": origin}) as ws:
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}


# ------------------------------------------------------------------ the real server
def test_opencrab_up_on_loopback_refuses_a_rebound_page_and_a_cross_site_post(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    closed = f"http://127.0.0.1:{closed_port()}"
    env.update(
        OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL=closed,
        OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL=closed,
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["--port", str(port), "--data-dir", str(tmp_path / "served")]
    token = create_token(tmp_path / "served", env, "guard")  # root needs one even on loopback
    bearer = {"Authorization": f"Bearer {token}"}
    server = start_up(args, env, base)  # loopback
    try:
        api = httpx.Client(base_url=base, headers=bearer)
        agent = api.post("/api/agents", json={"name": "aki", "prompt": "Be brief."}).json()
        # the rebound page is "same-origin" to the browser: only its Host gives it away
        rebound = {
            "Host": f"evil.example:{port}",
            "Origin": f"http://evil.example:{port}",
            "Sec-Fetch-Site": "same-origin",
        }
        read = api.get(f"/api/agents/{agent['id']}/workspace", headers=rebound)
        assert read.status_code == 421
        assert read.json()["error"] == "unknown_host"
        skills = api.get(f"/api/agents/{agent['id']}/skills").json()
        toggle = f"/api/agents/{agent['id']}/skills/{skills[0]['id']}/toggle"
        assert api.post(toggle, headers=rebound).status_code == 421
        cross = {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}
        posted = api.post(toggle, headers=cross)
        assert posted.status_code == 403
        assert posted.json()["error"] == "cross_site_request"
        after = api.get(f"/api/agents/{agent['id']}/skills").json()
        assert after[0]["isActive"] == skills[0]["isActive"]
        with (
            pytest.raises(InvalidStatus),
            connect(f"ws://127.0.0.1:{port}/api/ws", origin=EVIL, additional_headers=bearer),
        ):
            pass
        with connect(f"ws://127.0.0.1:{port}/api/ws", origin=base, additional_headers=bearer) as ws:
            ws.send('{"type": "ping"}')
            assert ws.recv(10) == '{"type":"pong"}'
    finally:
        stop_up(server)
