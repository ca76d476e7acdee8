"""The REST skeleton in-process: health, trace events, and the error shape."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from opencrab import __version__
from opencrab.config import Settings
from opencrab.event_log import EventLog
from opencrab.events import event_dict
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.event_chain import chain
from tests.server.local import LocalClient


@pytest.fixture
def client(settings: Settings, db: Database) -> Iterator[TestClient]:
    with LocalClient(create_app(settings, db)) as c:
        yield c


def test_health(client: TestClient) -> None:
    response = client.get("/api/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": __version__}


def test_trace_events_in_seed_form(client: TestClient, event_log: EventLog) -> None:
    events = chain(uuid4())
    event_log.append_many(events)
    trace = events[0].trace_id
    response = client.get(f"/api/traces/{trace}/events")
    assert response.status_code == 200
    assert response.json() == [event_dict(e) for e in events]
    context = client.get(f"/api/traces/{trace}/events", params={"view": "context"}).json()
    assert [e["type"] for e in context] == [
        "user",
        "reasoning",
        "tool_call",
        "tool_result",
        "message",
    ]


def test_errors_share_one_shape(client: TestClient) -> None:
    missing = client.get(f"/api/traces/{uuid4()}/events")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"
    assert "has no events" in missing.json()["message"]
    bad_id = client.get("/api/traces/not-a-uuid/events")
    assert bad_id.status_code == 400
    assert bad_id.json()["error"] == "validation_error"
    assert "trace_id" in bad_id.json()["message"]
    bad_view = client.get(f"/api/traces/{uuid4()}/events", params={"view": "everything"})
    assert bad_view.status_code == 400
    assert "view" in bad_view.json()["message"]
    unknown = client.get("/api/nowhere")
    assert unknown.status_code == 404
    assert set(unknown.json()) == {"error", "message"}
    wrong_method = client.post("/api/health")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"] == "method_not_allowed"


def test_openapi_documents_the_routes_and_error_shape(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/api/health", "/api/traces/{trace_id}/events"} <= set(spec["paths"])
    responses = spec["paths"]["/api/traces/{trace_id}/events"]["get"]["responses"]
    assert responses["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorResponse"
    }
    assert responses["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorResponse"
    }
    assert client.get("/docs").status_code == 200


def test_openapi_documents_validation_errors_as_400(client: TestClient) -> None:
    """Seed 002's OpenAPI: a request the server refuses is 400 with ErrorResponse, never 422."""
    spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "422" not in responses, f"{method} {path}"
            if operation.get("parameters") or operation.get("requestBody"):
                assert responses["400"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorResponse"
                }, f"{method} {path}"
    assert "HTTPValidationError" not in spec["components"]["schemas"]


SEED_RECORDS = {"NormalizedMessage", "RawRef", "ToolCall"}
"""Seed 003's NormalizedMessage keeps its own field names (see the README)."""


def test_every_rest_schema_is_camel_case(client: TestClient) -> None:
    """Every body an /api route takes or returns, seed 003's records aside (not /v1: OpenAI's)."""
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    seen: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.rsplit("/", 1)[1] not in seen:
                seen.add(ref.rsplit("/", 1)[1])
                walk(schemas[ref.rsplit("/", 1)[1]])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk({path: ops for path, ops in spec["paths"].items() if path.startswith("/api/")})
    assert {"Soul", "Identity", "AgentLlmConfig", "HeartbeatConfig"} <= seen
    snake = {
        f"{name}.{field}"
        for name in seen - SEED_RECORDS
        for field in schemas[name].get("properties", {})
        if "_" in field
    }
    assert not snake
