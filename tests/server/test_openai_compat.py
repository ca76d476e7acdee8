"""The official `openai` client chats with an agent through `/v1` (plain and streamed)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.core.tools import tool_id
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import Usage
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.local import LocalClient


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai")


def _app(settings: Settings, db: Database, scripted: ScriptedProvider, enabled: bool) -> TestClient:
    settings = settings.model_copy(deep=True)
    settings.gateway.openai_compat.enabled = enabled
    router = LlmRouter(settings)
    router.register_provider(scripted)
    return LocalClient(create_app(settings, db, router=router))


@pytest.fixture
def http(settings: Settings, db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    with _app(settings, db, scripted, enabled=True) as client:
        client.post("/api/agents", json={"name": "aki", "prompt": "Be brief."})
        yield client


@pytest.fixture
def client(http: TestClient) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused", http_client=http)


def test_models_list_the_agents(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["aki"]


def test_plain_chat_with_usage(client: openai.OpenAI, scripted: ScriptedProvider) -> None:
    usage = Usage(input_tokens=12, output_tokens=5, total_tokens=17)
    scripted.then(
        reply(
            tool_calls=calls(("generate_inner_voice", {"content": "greet"})).tool_calls, usage=usage
        ),
        reply(tool_calls=speak("Hello from aki").tool_calls, usage=usage),
    )
    done = client.chat.completions.create(model="aki", messages=[{"role": "user", "content": "hi"}])
    assert done.choices[0].message.content == "Hello from aki"
    assert done.choices[0].finish_reason == "stop"
    assert done.model == "aki"
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (24, 10)
    assert done.usage.total_tokens == 34


def test_streamed_chat(client: openai.OpenAI, scripted: ScriptedProvider) -> None:
    scripted.then("Streaming works fine")  # a plain-text answer streams token by token
    stream = client.chat.completions.create(
        model="aki",
        messages=[{"role": "user", "content": "stream please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Streaming works fine"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finals[-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


def test_a_resent_conversation_continues_its_session(
    client: openai.OpenAI, http: TestClient, scripted: ScriptedProvider
) -> None:
    scripted.then("first answer", "second answer")
    first = [{"role": "user", "content": "one"}]
    a = client.chat.completions.create(model="aki", messages=first)  # type: ignore[arg-type]
    history = [
        *first,
        {"role": "assistant", "content": a.choices[0].message.content},
        {"role": "user", "content": "two"},
    ]
    b = client.chat.completions.create(model="aki", messages=history)  # type: ignore[arg-type]
    assert b.choices[0].message.content == "second answer"
    sessions = http.get("/api/sessions", params={"kind": "chat"}).json()
    assert len(sessions) == 1
    assert sessions[0]["messageCount"] == 4
    # the agent saw the first exchange from its own history, not from the request
    seen = [m.content for m in scripted.requests[-1].messages if m.role == "user"]
    assert any("one" in str(s) for s in seen)


def test_unknown_agent_and_bad_requests_use_openai_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="last message"):
        client.chat.completions.create(
            model="aki", messages=[{"role": "assistant", "content": "x"}]
        )


def test_off_by_default(settings: Settings, db: Database, scripted: ScriptedProvider) -> None:
    with _app(settings, db, scripted, enabled=False) as http:
        assert http.get("/v1/models").status_code == 404
        assert http.post("/v1/chat/completions", json={}).status_code == 404


def test_max_tokens_reach_the_model_and_a_cut_reply_finishes_with_length(
    client: openai.OpenAI, scripted: ScriptedProvider
) -> None:
    scripted.then(reply("The garden needs", finish="length"))
    cut = client.chat.completions.create(
        model="aki", messages=[{"role": "user", "content": "Tell me everything"}], max_tokens=3
    )
    assert cut.choices[0].message.content == "The garden needs"
    assert cut.choices[0].finish_reason == "length"
    assert scripted.requests[-1].max_tokens == 3

    scripted.outcomes.clear()  # the last outcome repeats until replaced
    scripted.then(reply("Short.", finish="length"))
    stream = client.chat.completions.create(
        model="aki",
        messages=[{"role": "user", "content": "Again"}],
        max_completion_tokens=2,  # the newer name wins
        max_tokens=50,
        stream=True,
    )
    finals = [c.choices[0].finish_reason for c in stream if c.choices]
    assert finals[-1] == "length"
    assert scripted.requests[-1].max_tokens == 2

    scripted.outcomes.clear()
    scripted.then(reply("All of it."))
    whole = client.chat.completions.create(
        model="aki", messages=[{"role": "user", "content": "Once more"}]
    )
    assert whole.choices[0].finish_reason == "stop"
    assert scripted.requests[-1].max_tokens is None


def _openai_shape(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_every_error_has_openais_shape(client: openai.OpenAI, http: TestClient) -> None:
    with pytest.raises(openai.BadRequestError, match="role") as bad_role:
        client.chat.completions.create(
            model="aki",
            messages=[{"role": "wizard", "content": "x"}],  # type: ignore[misc,list-item]
        )
    assert bad_role.value.param == "messages.0.role"
    with pytest.raises(openai.BadRequestError, match="max_tokens") as bad_limit:
        client.chat.completions.create(
            model="aki", messages=[{"role": "user", "content": "x"}], max_tokens=0
        )
    assert bad_limit.value.param == "max_tokens"
    assert bad_limit.value.type == "invalid_request_error"
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="aki", messages=[])

    not_json = http.post(
        "/v1/chat/completions", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert _openai_shape(not_json, 400)["type"] == "invalid_request_error"
    assert _openai_shape(http.get("/v1/embeddings"), 404)["type"] == "invalid_request_error"
    assert _openai_shape(http.get("/v1/models?limt=1"), 400)["param"] == "limt"
    assert _openai_shape(http.put("/v1/models"), 405)["message"]
    # the REST API keeps its own shape
    assert set(http.get("/api/nowhere").json()) == {"error", "message"}


def test_a_missing_token_is_an_openai_authentication_error(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> None:
    settings = settings.model_copy(deep=True)
    settings.gateway.openai_compat.enabled = True
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router, auth=True)) as http:
        client = openai.OpenAI(
            base_url="http://127.0.0.1:8080/v1", api_key="wrong", http_client=http
        )
        with pytest.raises(openai.AuthenticationError, match="bearer token") as refused:
            client.models.list()
    assert refused.value.type == "invalid_request_error"
    assert refused.value.code == "invalid_api_key"


def test_a_held_call_is_answered_with_where_to_decide_and_the_answer_lands_in_the_session(
    client: openai.OpenAI, http: TestClient, scripted: ScriptedProvider
) -> None:
    made = http.post(
        "/api/agents",
        json={"name": "kai", "prompt": "Run.", "toolIds": [tool_id("execute_command")]},
    )
    settings = {"executeCommand": True, "approvals": {"execute_command": "always"}}
    http.put(f"/api/agents/{made.json()['id']}/tool-settings", json=settings)
    scripted.then(calls(("execute_command", {"command": "echo made"})), reply("It printed made."))
    done = client.chat.completions.create(
        model="kai", messages=[{"role": "user", "content": "run it"}]
    )
    content = done.choices[0].message.content or ""
    assert "execute_command waits for a person's approval" in content
    [pending] = http.get("/api/approvals", params={"status": "pending"}).json()
    assert pending["id"] in content
    assert f"/sessions/{pending['sessionId']}" in content

    assert http.post(f"/api/approvals/{pending['id']}/approve").status_code == 200
    deadline = time.monotonic() + 60
    url = f"/api/sessions/{pending['sessionId']}/messages"
    while (messages := http.get(url).json())[-1]["role"] != "assistant":
        assert time.monotonic() < deadline, messages
        time.sleep(0.1)
    assert messages[-1]["content"] == "It printed made."
