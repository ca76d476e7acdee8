"""One set of message rules (not blank, at most MAX_MESSAGE_CHARS) in every gateway.

REST, WebSocket and `/v1` refuse the same messages, each in its own error shape, and a
refused message runs no turn and stores nothing. The CLI and Discord are tested with
their own gateways (tests/cli/test_agent_cli.py, tests/core/test_discord_gateway.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.errors import ValidationError
from opencrab.llm.router import LlmRouter
from opencrab.messages import MAX_MESSAGE_CHARS, check_message, message_problem
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

BLANK = " \n\t "
TOO_LONG = "x" * (MAX_MESSAGE_CHARS + 1)


@pytest.fixture
def app_client(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> Iterator[TestClient]:
    settings = settings.model_copy(deep=True)
    settings.gateway.openai_compat.enabled = True
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as c:
        yield c


def test_the_rules() -> None:
    assert message_problem("hi") is None
    assert message_problem("x" * MAX_MESSAGE_CHARS) is None
    assert "empty" in str(message_problem(BLANK))
    assert "empty" in str(message_problem(""))
    assert f"{MAX_MESSAGE_CHARS:,}" in str(message_problem(TOO_LONG))
    with pytest.raises(ValidationError, match="empty"):
        check_message(BLANK)
    assert check_message(" hi ") == " hi "


def test_rest_refuses_blank_and_long_messages(
    app_client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(app_client)["id"]
    session_id = app_client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    url = f"/api/sessions/{session_id}/messages"
    assert "empty" in error_of(
        app_client.post(url, json={"content": BLANK}), 400, "validation_error"
    )
    assert "content" in error_of(
        app_client.post(url, json={"content": TOO_LONG}), 400, "validation_error"
    )
    assert app_client.get(url).json() == []
    assert scripted.requests == []


def test_websocket_refuses_blank_and_long_messages(
    app_client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(app_client)
    with app_client.websocket_connect("/api/ws") as ws:
        for content in (BLANK, TOO_LONG):
            ws.send_json({"type": "chat", "agent": "aki", "content": content})
            refused = ws.receive_json()
            assert (refused["type"], refused["error"]) == ("error", "validation_error")
            assert "content" in refused["message"]
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}
    assert app_client.get("/api/sessions", params={"kind": "all"}).json() == []
    assert scripted.requests == []


def test_openai_endpoint_refuses_blank_and_long_messages(
    app_client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(app_client)
    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="-", http_client=app_client)
    with pytest.raises(openai.BadRequestError, match="empty") as blank:
        client.chat.completions.create(model="aki", messages=[{"role": "user", "content": BLANK}])
    assert blank.value.param == "messages"
    with pytest.raises(openai.BadRequestError, match=f"{MAX_MESSAGE_CHARS:,}"):
        client.chat.completions.create(
            model="aki", messages=[{"role": "user", "content": TOO_LONG}]
        )
    assert scripted.requests == []


async def test_the_turn_service_refuses_them_for_any_caller(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> None:
    router = LlmRouter(settings)
    router.register_provider(scripted)
    async with Runtime.open(settings, db=db, router=router) as runtime:
        agent = runtime.agents.create(AgentCreate(name="aki", prompt="p"))
        for text in (BLANK, TOO_LONG):
            with pytest.raises(ValidationError):
                await runtime.chat(agent, text)
    assert scripted.requests == []
