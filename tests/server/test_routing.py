"""The route index (opencrab.server.routing): the route FastAPI would take, found faster."""

from __future__ import annotations

import gc
import re
from typing import Any
from uuid import UUID

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import iter_route_contexts
from pydantic import TypeAdapter
from starlette.routing import Match

from opencrab.auth import Scope, TokenStore
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.server.api.agents import AgentSummary, summaries_json
from opencrab.server.app import create_app
from opencrab.server.routing import RouteIndex
from opencrab.store import Database
from tests.server.local import LocalClient

SAMPLES = {"path": "a/b.txt", "int": "7", "uuid": "0b6c6f3e-7f0e-4d7e-9a55-3f1b2c4d5e6f"}


def _concrete(template: str) -> str:
    """A path `template` matches: each parameter filled with a value its convertor takes."""
    return re.sub(r"{[^}:]+(?::([^}]+))?}", lambda m: SAMPLES.get(m.group(1) or "", "x1"), template)


def _scope(kind: str, method: str, path: str, root_path: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "method": method,
        "path": root_path + path,
        "root_path": root_path,
        "headers": [],
        "query_string": b"",
    }


def _fastapi_choice(app: FastAPI, scope: dict[str, Any]) -> tuple[Any, Any] | None:
    """The first route that matches fully, trying every route in order (FastAPI's way)."""
    for route in app.router.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route, child
    return None


@pytest.fixture
def app(settings: Settings, db: Database) -> FastAPI:
    settings.dashboard.enabled = True  # its pages and forms are routes too
    settings.gateway.openai_compat.enabled = True
    return create_app(settings, db, auth=True)


def test_the_index_takes_the_route_fastapi_takes_for_every_path(app: FastAPI) -> None:
    index = app.router.middleware_stack
    assert isinstance(index, RouteIndex)
    paths: set[str] = {"", "/", "/nothing", "/api", "/api/", "/API/agents", "//api/agents"}
    methods: set[str] = set()
    for context in iter_route_contexts(app.routes):
        template = getattr(context, "path_format", None) or getattr(context.route, "path", "")
        if not template.startswith("/"):
            continue
        path = _concrete(template)
        paths |= {path, path + "/", path[:-1], path + "/more", path.upper(), path + "%2F"}
        methods |= set(context.methods or ())
    assert len(paths) > 300  # every route of the API, the dashboard, /v1, A2A, MCP
    compared = 0
    for path in sorted(paths):
        for kind, method in [("http", m) for m in sorted(methods | {"PATCH"})] + [
            ("websocket", "GET")
        ]:
            for root in ("", "/behind-a-proxy"):
                scope = _scope(kind, method, path, root)
                ours = index.first_full_match(dict(scope))
                theirs = _fastapi_choice(app, dict(scope))
                assert (ours is None) == (theirs is None), (kind, method, root, path)
                if ours is not None and theirs is not None:
                    assert ours[0] is theirs[0], (kind, method, root, path)
                    assert ours[1] == theirs[1], (kind, method, root, path)
                    compared += 1
    assert compared > 200


def test_routes_added_after_the_first_request_are_served(settings: Settings, db: Database) -> None:
    app = create_app(settings, db)  # loopback, no token
    with LocalClient(app) as client:
        assert client.get("/api/agents").status_code == 200  # the index is built
        late = APIRouter(prefix="/api/late")

        @late.get("/one")
        async def one() -> dict[str, int]:
            return {"one": 1}

        app.include_router(late)
        assert client.get("/api/late/one").json() == {"one": 1}

        @late.get("/two")  # a route of a router the app already includes
        async def two() -> dict[str, int]:
            return {"two": 2}

        assert client.get("/api/late/two").json() == {"two": 2}

        @app.get("/api/agents/{id}/late")  # after routes that take the same prefix
        async def late_of_agent(id: str) -> dict[str, str]:
            return {"agent": id}

        assert client.get("/api/agents/x1/late").json() == {"agent": "x1"}
        # what no route matches is still FastAPI's answer: 404, and 405 for a wrong method
        assert client.get("/api/late/three").status_code == 404
        assert client.delete("/api/late/one").status_code == 405


def test_the_agent_list_is_the_json_fastapi_would_send() -> None:
    rows = [
        ("0b6c6f3e-7f0e-4d7e-9a55-3f1b2c4d5e6f", "aki", None),
        ("1c6c6f3e-7f0e-4d7e-9a55-3f1b2c4d5e6f", "さくら", 'says "hi"\n\t\\ \u2028 \x01 🦀'),
        ("2d6c6f3e-7f0e-4d7e-9a55-3f1b2c4d5e6f", "</script>", ""),
    ]
    models = [AgentSummary(id=UUID(i), name=n, description=d) for i, n, d in rows]
    expected = TypeAdapter(list[AgentSummary]).dump_json(models, by_alias=True, exclude_none=True)
    assert summaries_json(rows) == expected
    assert summaries_json([]) == b"[]"


def test_the_served_heap_is_frozen_while_the_app_runs(settings: Settings, db: Database) -> None:
    app = create_app(settings, db, freeze_startup=True)
    assert gc.get_freeze_count() == 0
    with LocalClient(app) as client:
        assert gc.get_freeze_count() > 10_000  # the modules, the app, the runtime
        assert client.get("/api/agents").status_code == 200
    assert gc.get_freeze_count() == 0


def _answer(client: LocalClient, path: str, **options: Any) -> tuple[int, dict[str, str], bytes]:
    response = client.get(path, **options)
    headers = {k: v for k, v in response.headers.items() if k != "date"}
    return response.status_code, headers, response.content


def test_a_route_answered_directly_answers_as_fastapi_does(
    settings: Settings, db: Database
) -> None:
    app = create_app(settings, db, auth=True)
    index = app.router.middleware_stack
    assert isinstance(index, RouteIndex)
    tokens = TokenStore(db)
    _, reader = tokens.create("reader", Scope.read)
    _, admin = tokens.create("admin", Scope.admin)
    AgentStore(db, settings).create(AgentCreate(name="aki", prompt="Be brief."))
    asks: list[tuple[str, dict[str, Any]]] = [
        ("/api/agents", {"headers": {"Authorization": f"Bearer {reader}"}}),
        ("/api/agents", {"headers": {"Authorization": f"Bearer {admin}"}}),
        ("/api/agents", {}),  # no token: 401 from the auth middleware
        ("/api/agents?limit=5", {"headers": {"Authorization": f"Bearer {reader}"}}),  # 400
        ("/api/agents/", {"headers": {"Authorization": f"Bearer {reader}"}}),  # a redirect
    ]
    with LocalClient(app, follow_redirects=False) as client:
        direct = [_answer(client, path, **options) for path, options in asks]
        assert "/api/agents" in index.direct
        # any dependency override sends every request FastAPI's own way
        app.dependency_overrides[_unused_dependency] = _unused_dependency
        fastapi = [_answer(client, path, **options) for path, options in asks]
    assert direct == fastapi
    assert [status for status, _, _ in direct] == [200, 200, 401, 400, 307]
    assert b'"name":"aki"' in direct[0][2]


async def _unused_dependency() -> None:
    return None
