"""Bad input over REST gets a 4xx naming the problem, never a 5xx (issue 17 §6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings, load_settings
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

MAX_SQL_INT = 2**63 - 1


@pytest.fixture
def wired(fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app with its OpenAI provider answered over the wire by the fake server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    settings: Settings = load_settings()
    db = Database(settings.database_url)
    db.upgrade()
    with LocalClient(create_app(settings, db)) as client:
        yield client
    db.close()


def _nested(depth: int) -> str:
    return '{"path": "a.md", "content": "x", "x": ' + "[" * depth + "]" * depth + "}"


def test_deeply_nested_tool_arguments_over_the_wire_are_an_error_result(
    wired: TestClient, fake_llm_server: FakeLlmServer
) -> None:
    calls = [
        {
            "id": f"call_{depth}",
            "type": "function",
            "function": {"name": "ws_write", "arguments": _nested(depth)},
        }
        for depth in (255, 5000)
    ]
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": None, "tool_calls": calls}, finish="tool_calls"))
    )
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "done"})))
    new_agent(wired)
    session = wired.post("/api/sessions", json={"agentId": "aki"}).json()
    turn = wired.post(f"/api/sessions/{session['id']}/messages", json={"content": "hi"})
    assert turn.status_code == 201, turn.text
    actions = turn.json()["turn"]["actions"]
    assert [a["success"] for a in actions] == [False, False]
    assert all("nested more than" in json.loads(a["output"])["error"] for a in actions)
    # the model was told, and the workspace untouched
    second = fake_llm_server.requests[-1].json["messages"]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "tool"]
    listing = wired.get("/api/agents/aki/workspace").json()
    assert listing["entries"] == []


def _integer_parameters(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                kinds = [schema.get("type")] + [s.get("type") for s in schema.get("anyOf", [])]
                if "integer" in kinds:
                    found.append((method, path, parameter))
    return found


def test_every_integer_parameter_is_bounded_to_what_the_database_holds(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    spec = client.get("/openapi.json").json()
    parameters = _integer_parameters(spec)
    assert {p["name"] for _, _, p in parameters} >= {"offset", "afterId", "limit"}
    for method, path, parameter in parameters:
        schema = parameter["schema"]
        integer = next(  # an optional parameter's integer form is one of its anyOf
            (s for s in [schema, *schema.get("anyOf", [])] if s.get("type") == "integer"), {}
        )
        assert integer.get("maximum", float("inf")) <= MAX_SQL_INT, (method, path, parameter)

    # and each one, sent past 64 bits on a real record, is a 400
    agent = new_agent(client)
    new_agent(client, "ben")
    scripted.then(speak("ok"))
    session = client.post("/api/sessions", json={"agentId": agent["id"]}).json()
    turn = client.post(f"/api/sessions/{session['id']}/messages", json={"content": "hi"})
    assert turn.status_code == 201, turn.text
    discussion = client.post(
        "/api/discussions", json={"theme": "t", "participants": ["aki", "ben"], "maxTurns": 1}
    ).json()
    ids = {
        "/api/agents/{id}": agent["id"],
        "/api/sessions/{id}": session["id"],
        "/api/discussions/{id}": discussion["id"],
        "/api/imports/sessions/{id}": "00000000-0000-4000-8000-000000000000",
    }
    for method, path, parameter in parameters:
        assert method == "get", (method, path)
        url = path
        for prefix, value in ids.items():
            url = url.replace(prefix, prefix.replace("{id}", str(value)))
        for huge in (2**63, 2**64, 10**40):
            response = client.get(url, params={parameter["name"]: huge})
            message = error_of(response, 400, "validation_error")
            assert parameter["name"] in message, (url, message)


def test_a_websocket_subscribe_past_64_bits_is_a_validation_error(client: TestClient) -> None:
    agent = new_agent(client)
    session = client.post("/api/sessions", json={"agentId": agent["id"]}).json()
    with client.websocket_connect("/api/ws") as ws:
        ws.send_json({"type": "subscribe", "sessionId": session["id"], "afterSeq": 2**64})
        answer = ws.receive_json()
        assert (answer["type"], answer["error"]) == ("error", "validation_error"), answer
        ws.send_json({"type": "subscribe", "sessionId": session["id"], "afterSeq": 0})
        assert ws.receive_json()["type"] == "subscribed"


def test_a_download_of_a_file_with_a_non_latin1_name_uses_rfc_5987(client: TestClient) -> None:
    new_agent(client)
    name = '報告 "α" 😀.txt'
    assert client.put(f"/api/agents/aki/workspace/docs/{name}", content=b"hi").status_code == 201
    response = client.get(f"/api/agents/aki/workspace/docs/{name}", params={"download": True})
    assert response.status_code == 200, response.text
    assert response.content == b"hi"
    disposition = response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="')
    fallback = disposition.split('filename="', 1)[1].split('"', 1)[0]
    assert fallback.isascii()
    assert fallback.endswith(".txt")
    encoded = disposition.split("filename*=", 1)[1]
    assert encoded == "UTF-8''" + quote(name, safe="")
    plain = client.get("/api/agents/aki/workspace/docs/" + name)
    assert "content-disposition" not in plain.headers


def long_path() -> str:
    """A path within the 1,024-character rule whose UTF-8 form passes the OS's limit."""
    component = "😀" * 63  # 252 bytes: every name is within the 255-byte rule
    path = "/".join([component] * 16)  # 1,023 characters, 4,047 bytes
    assert len(path) <= 1024
    assert len(path.encode()) > 4000
    return path


def test_a_path_over_the_os_limit_once_encoded_is_a_400(
    client: TestClient, settings: Settings
) -> None:
    new_agent(client)
    url = "/api/agents/aki/workspace/" + long_path()
    responses = [
        client.put(url, content=b"data"),
        client.get(url),
        client.delete(url),
        client.get("/api/agents/aki/workspace", params={"path": long_path()}),
    ]
    for response in responses:
        message = error_of(response, 400, "workspace_error")
        assert "UTF-8" in message
        assert str(settings.data_dir) not in message
    assert client.get("/api/agents/aki/workspace").json()["entries"] == []


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('{"personaName": "x", "customTraits": {"s": "\\ud800"}}', "not valid JSON"),
        ('{"personaName": "x", "customTraits": {"n": NaN}}', "not valid JSON"),
        (
            '{"personaName": "x", "customTraits": {"a": ' + "[" * 256 + "]" * 256 + "}}",
            "JSON nested deeper than 64 levels",
        ),
    ],
    ids=["lone surrogate", "NaN", "256 levels"],
)
def test_json_that_could_not_be_stored_and_read_back_is_refused(
    client: TestClient, body: str, problem: str
) -> None:
    """Python's parser lets these through; stored, the soul could never be read again
    (500 on every GET, the agent's turns failing) — now nothing is stored."""
    new_agent(client)
    before = client.get("/api/agents/aki/soul").json()
    headers = {"content-type": "application/json"}
    sent = client.put("/api/agents/aki/soul", content=body.encode(), headers=headers)
    assert problem in error_of(sent, 400, "validation_error")
    assert client.get("/api/agents/aki/soul").json() == before


def test_a_ticket_with_a_lone_surrogate_is_refused_and_not_created(client: TestClient) -> None:
    new_agent(client)
    body = b'{"agentId": "aki", "params": {"a": "\\ud800"}}'
    sent = client.post("/api/tickets", content=body, headers={"content-type": "application/json"})
    assert "not valid JSON" in error_of(sent, 400, "validation_error")
    assert client.get("/api/tickets").json() == []


def test_invalid_json_says_its_line_and_column(client: TestClient) -> None:
    body = '{\n  "name": "aki",\n  "prompt": "Hi." \n  "description": "x"\n}'
    sent = client.post("/api/agents", content=body, headers={"content-type": "application/json"})
    message = error_of(sent, 400, "validation_error")
    assert message == "body: not valid JSON: expecting ',' delimiter: line 4 column 3 (char 40)"
    assert client.get("/api/agents").json() == []
