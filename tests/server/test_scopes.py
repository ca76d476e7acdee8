"""Token scopes (read ⊂ chat ⊂ operate ⊂ admin): every route declares what it needs, a
token whose scope falls short is refused with 403 before the route runs, and deciders and
audit actors are the token's name, never a name from the body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIWebSocketRoute, iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import Mount

from opencrab.a2a.server_paths import PREFIX as A2A_PREFIX
from opencrab.auth import Scope, TokenStore
from opencrab.config import Settings
from opencrab.core.tools import tool_id
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.server.scopes import (
    ROUTE_CHECKS,
    ROUTE_SCOPES,
    SAFE_METHODS,
    check_route,
    declared_scope,
    require_scope,
)
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

WRITE = {"path": "out.txt", "content": "made"}


def _runs_require_scope(route: Any) -> bool:
    dependant = getattr(route, "dependant", None)
    return (
        dependant is not None
        and any(d.call is check_route for d in dependant.dependencies)
        and require_scope in ROUTE_CHECKS
    )


def test_every_route_declares_its_scope_and_is_checked(settings: Settings, db: Database) -> None:
    settings.dashboard.enabled = True
    settings.gateway.openai_compat.enabled = True
    app = create_app(settings, db, auth=True)
    seen: set[str] = set()
    undeclared: list[str] = []
    unchecked: list[str] = []
    for route in iter_route_contexts(app.routes):  # the routes of included routers too
        if isinstance(route.route, Mount):  # static files: GET only, no secrets
            continue
        if route.path.startswith(f"{A2A_PREFIX}/"):  # each A2A operation checks its scope
            continue  # itself, as /mcp's tools do (tests/a2a/test_server.py)
        websocket = isinstance(route.route, APIWebSocketRoute)
        methods = {"WEBSOCKET"} if websocket else set(route.methods or ())
        risky = methods - SAFE_METHODS
        if risky and not _runs_require_scope(route):
            unchecked.append(f"{sorted(risky)} {route.path}")
        for method in risky:
            seen.add(f"{method} {route.path}")
            if not declared_scope(route, method)[0]:
                undeclared.append(f"{method} {route.path}")
    assert undeclared == [], "declare these in opencrab.server.scopes.ROUTE_SCOPES"
    assert unchecked == [], "these routes do not run require_scope"
    assert set(ROUTE_SCOPES) - seen == set(), "ROUTE_SCOPES names routes that do not exist"
    assert len(seen) >= 50  # every state-changing route of the API and the dashboard


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def scoped(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> Iterator[tuple[TestClient, dict[Scope, dict[str, str]]]]:
    """An app requiring tokens, and the headers of one token per scope (the client's
    own requests go as `admin`)."""
    settings.gateway.openai_compat.enabled = True
    store = TokenStore(db)
    names = {Scope.read: "reader", Scope.chat: "chatter", Scope.operate: "ops", Scope.admin: "root"}
    headers = {scope: _bearer(store.create(name, scope)[1]) for scope, name in names.items()}
    router = LlmRouter(settings)
    router.register_provider(scripted)
    app = create_app(settings, db, router=router, auth=True)
    with LocalClient(app, headers=headers[Scope.admin]) as client:
        yield client, headers


def _held(client: TestClient, scripted: ScriptedProvider) -> dict[str, Any]:
    """A chat turn whose write_file call waits for a person; its TurnOutcome."""
    agent = new_agent(client, toolIds=[tool_id("write_file")])
    put = client.put(
        f"/api/agents/{agent['id']}/tool-settings", json={"approvals": {"write_file": "always"}}
    )
    assert put.status_code == 200, put.text
    session_id = client.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    scripted.then(calls(("write_file", WRITE)), speak("ok"))
    posted = client.post(f"/api/sessions/{session_id}/messages", json={"content": "go"})
    turn: dict[str, Any] = posted.json()["turn"]
    assert turn["stoppedBy"] == "approval"
    return turn


def _forbidden(response: Any, held: str, needed: str) -> None:
    message = error_of(response, 403, "forbidden")
    assert f"this token's scope is '{held}'" in message
    assert f"needs '{needed}'" in message
    assert f"--scope {needed}" in message


def test_a_read_token_reads_but_cannot_approve_change_settings_import_start_or_delete(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]],
    scripted: ScriptedProvider,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    client, tokens = scoped
    read = tokens[Scope.read]
    turn = _held(client, scripted)
    agent_id = client.get("/api/agents").json()[0]["id"]
    assert client.get("/api/agents", headers=read).status_code == 200
    assert client.get(f"/api/approvals/{turn['approvalId']}", headers=read).status_code == 200

    approve = client.post(f"/api/approvals/{turn['approvalId']}/approve", headers=read)
    _forbidden(approve, "read", "operate")
    assert client.get(f"/api/approvals/{turn['approvalId']}").json()["status"] == "pending"
    assert not list(data_dir.glob("agents/*/workspace/out.txt"))  # the call did not run

    settings_before = client.get("/api/llm/settings").json()
    patch = client.patch(
        "/api/llm/providers/openai", json={"baseUrl": "http://attacker.example"}, headers=read
    )
    _forbidden(patch, "read", "operate")
    assert client.get("/api/llm/settings").json() == settings_before
    assert client.get("/api/llm/settings/audit").json() == []

    transcripts = tmp_path / "codex"
    transcripts.mkdir()
    imported = client.post(
        "/api/imports", json={"source": "codex", "path": str(transcripts)}, headers=read
    )
    _forbidden(imported, "read", "operate")

    agent_mode = client.post(
        "/api/agent-mode/sessions",
        json={"repository": str(tmp_path), "request": "rewrite everything"},
        headers=read,
    )
    _forbidden(agent_mode, "read", "operate")
    started = client.post(
        "/api/agent-mode/sessions/6f0c1d2e-0000-4000-8000-0000000000ff/start",
        json={"cli": "other", "command": ["id"]},
        headers=read,
    )
    _forbidden(started, "read", "operate")

    _forbidden(client.delete(f"/api/agents/{agent_id}", headers=read), "read", "operate")
    assert client.get(f"/api/agents/{agent_id}").status_code == 200
    _forbidden(client.delete(f"/api/sessions/{turn['sessionId']}", headers=read), "read", "operate")
    assert client.get(f"/api/sessions/{turn['sessionId']}").status_code == 200

    message = client.post(
        f"/api/sessions/{turn['sessionId']}/messages", json={"content": "hi"}, headers=read
    )
    _forbidden(message, "read", "chat")


def test_a_chat_token_chats_but_cannot_approve(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]], scripted: ScriptedProvider
) -> None:
    client, tokens = scoped
    chat = tokens[Scope.chat]
    turn = _held(client, scripted)  # its turn's last reply, "ok", is still queued
    agent_id = client.get("/api/agents").json()[0]["id"]
    made = client.post("/api/sessions", json={"agentId": agent_id}, headers=chat)
    assert made.status_code == 201, made.text
    said = client.post(
        f"/api/sessions/{made.json()['id']}/messages", json={"content": "hi"}, headers=chat
    )
    assert said.status_code == 201, said.text
    assert said.json()["turn"]["reply"]["content"] == "ok"

    _forbidden(
        client.post(f"/api/approvals/{turn['approvalId']}/approve", headers=chat), "chat", "operate"
    )
    _forbidden(
        client.post(f"/api/approvals/{turn['approvalId']}/deny", headers=chat), "chat", "operate"
    )
    assert client.get(f"/api/approvals/{turn['approvalId']}").json()["status"] == "pending"
    tool_settings = client.put(
        f"/api/agents/{agent_id}/tool-settings", json={"executeCommand": True}, headers=chat
    )
    _forbidden(tool_settings, "chat", "admin")


def test_only_admin_changes_an_agents_tool_settings(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]],
) -> None:
    client, tokens = scoped
    agent = new_agent(client)
    url = f"/api/agents/{agent['id']}/tool-settings"
    refused = client.put(url, json={"executeCommand": True}, headers=tokens[Scope.operate])
    _forbidden(refused, "operate", "admin")
    assert client.get(url).json()["executeCommand"] is False
    allowed = client.put(url, json={"executeCommand": True}, headers=tokens[Scope.admin])
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["executeCommand"] is True


def test_v1_chat_needs_chat_and_answers_in_openais_shape(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]], scripted: ScriptedProvider
) -> None:
    client, tokens = scoped
    agent = new_agent(client)
    body = {"model": agent["name"], "messages": [{"role": "user", "content": "hi"}]}
    refused = client.post("/v1/chat/completions", json=body, headers=tokens[Scope.read])
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("permission_error", "forbidden")
    assert "this token's scope is 'read'" in error["message"]
    scripted.then(speak("hello"))
    answered = client.post("/v1/chat/completions", json=body, headers=tokens[Scope.chat])
    assert answered.status_code == 200, answered.text
    assert assistant_text(answered.json()) == "hello"


def assistant_text(completion: dict[str, Any]) -> str:
    return str(completion["choices"][0]["message"]["content"])


def test_a_read_token_follows_the_websocket_but_cannot_chat_there(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]], scripted: ScriptedProvider
) -> None:
    client, tokens = scoped
    agent = new_agent(client)
    with client.websocket_connect("/api/ws", headers=tokens[Scope.read]) as ws:
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}
        ws.send_json({"type": "chat", "agent": agent["id"], "content": "hi", "requestId": "r"})
        refused = ws.receive_json()
        assert (refused["type"], refused["error"], refused["requestId"]) == (
            "error",
            "forbidden",
            "r",
        )
        assert "this token's scope is 'read'" in refused["message"]
        ws.send_json({"type": "discussion.start", "theme": "t", "participants": [agent["id"]]})
        assert ws.receive_json()["error"] == "forbidden"
    assert scripted.requests == []  # no turn ran
    scripted.then(speak("hello"))
    with client.websocket_connect("/api/ws", headers=tokens[Scope.chat]) as ws:
        ws.send_json({"type": "chat", "agent": agent["id"], "content": "hi"})
        for _ in range(50):
            message = ws.receive_json()
            if message["type"] == "chat.done":
                break
        assert message["reply"] == "hello"


def test_the_decider_is_the_tokens_name_not_the_bodys(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]], scripted: ScriptedProvider
) -> None:
    client, tokens = scoped
    turn = _held(client, scripted)
    denied = client.post(
        f"/api/approvals/{turn['approvalId']}/deny",
        json={"reason": "not here", "decidedBy": "mallory"},
        headers=tokens[Scope.operate],
    )
    assert denied.status_code == 200, denied.text
    assert denied.json()["decidedBy"] == "ops"
    assert client.get(f"/api/approvals/{turn['approvalId']}").json()["decidedBy"] == "ops"

    changed = client.patch(
        "/api/llm/providers/openai", json={"enabled": False}, headers=tokens[Scope.operate]
    )
    assert changed.status_code == 200, changed.text
    assert {e["actor"] for e in client.get("/api/llm/settings/audit").json()} == {"ops"}


def test_open_loopback_mode_may_do_everything_and_decides_as_local(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    turn = _held(client, scripted)
    approved = client.post(
        f"/api/approvals/{turn['approvalId']}/approve", json={"decidedBy": "mallory"}
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["decidedBy"] == "local"


def test_the_spec_names_each_operations_scope(
    scoped: tuple[TestClient, dict[Scope, dict[str, str]]],
) -> None:
    client, _ = scoped
    paths = client.get("/openapi.json").json()["paths"]
    assert paths["/api/agents"]["get"]["x-scope"] == "read"
    assert paths["/api/sessions/{id}/messages"]["post"]["x-scope"] == "chat"
    approve = paths["/api/approvals/{id}/approve"]["post"]
    assert approve["x-scope"] == "operate"
    assert "403" in approve["responses"]
    assert paths["/api/agents/{id}/tool-settings"]["put"]["x-scope"] == "admin"
