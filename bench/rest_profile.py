"""Where one `GET /api/agents` request's time goes, in-process, counted by layer.

The app is bench/server_load.py's (a SQLite store with 10 agents, the default loopback
settings: no token needed), its lifespan running; each request is one ASGI call with the
scope uvicorn would build (Host 127.0.0.1, keep-alive, no body), so no socket, no HTTP
parsing and no client is in the figure. Beside it the bare Starlette app of
bench/server_load.py serving the same JSON as a constant, called the same way: the ratio
of the two is what the server's own work costs over a constant endpoint, without
uvicorn's share (which both pay alike under load). Times are this process's CPU time
(time.process_time), so other work on the machine does not count.

With `--profile` the OpenCrab requests also run under cProfile and each function's own
time is summed by layer (the module it belongs to): FastAPI's routing and dependency
solving, Starlette, OpenCrab's middleware and dependencies, the route, the database
read, pydantic (validation and serialisation), JSON, asyncio and the rest; a builtin's time (a dict
lookup, sqlite3's execute) counts for the layer that called it. cProfile's own cost
inflates every layer (the more calls, the more), so the shares matter, not the totals.

    python bench/rest_profile.py [--requests 20000] [--profile] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

AGENTS = 10
WARM_UP = 500

LAYERS = (
    # (layer, what a function's file path contains), first match wins
    ("fastapi routing and dependencies", "/fastapi/"),
    ("starlette", "/starlette/"),
    ("pydantic", "/pydantic"),
    ("database read (sqlalchemy, sqlite3)", "/sqlalchemy/"),
    ("database read (sqlalchemy, sqlite3)", "sqlite3"),
    ("database read (opencrab.store, core.agent)", "/opencrab/store/"),
    ("database read (opencrab.store, core.agent)", "/opencrab/core/agent"),
    ("OpenCrab middleware (guard, auth, limits, mark)", "/opencrab/server/guard"),
    ("OpenCrab middleware (guard, auth, limits, mark)", "/opencrab/server/auth"),
    ("OpenCrab middleware (guard, auth, limits, mark)", "/opencrab/server/limits"),
    ("OpenCrab middleware (guard, auth, limits, mark)", "/opencrab/server/instance"),
    ("OpenCrab route index (server/routing.py)", "/opencrab/server/routing"),
    ("OpenCrab app dependencies (scope, query, JSON)", "/opencrab/server/scopes"),
    ("OpenCrab app dependencies (scope, query, JSON)", "/opencrab/server/errors"),
    ("OpenCrab app dependencies (scope, query, JSON)", "/opencrab/server/deps"),
    ("the route (server/api/agents.py)", "/opencrab/server/api/"),
    ("OpenCrab other", "/opencrab/"),
    ("json / orjson", "json"),
    ("asyncio", "asyncio"),
    ("the bench's own driver", "rest_profile"),
)


def build_opencrab(data: str) -> Any:
    from bench.server_load import speech
    from tests.fakes.scripted_provider import ScriptedProvider

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.llm.router import LlmRouter
    from opencrab.server.app import create_app
    from opencrab.store import Database

    settings = load_settings(overrides={"data_dir": data})
    db = Database(settings.database_url)
    db.upgrade()
    store = AgentStore(db, settings)
    for i in range(AGENTS):
        store.create(AgentCreate(name=f"agent-{i}", prompt="Be brief.", description="bench"))
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", speech()))
    return create_app(settings, db, router=router)


def build_bare(body: bytes) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def agents(_: Any) -> Response:
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/api/agents", agents)])


def scope_of(path: str) -> dict[str, Any]:
    """What uvicorn hands the app for `GET path` from a local client."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8080"), (b"user-agent", b"bench")],
        "state": {},
    }


async def call(app: Any, path: str) -> tuple[int, bytes]:
    """One request through the app: (status, body)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope_of(path), receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body


async def rate(app: Any, requests: int) -> float:
    """Requests per second, one after another."""
    for _ in range(WARM_UP):
        await call(app, "/api/agents")
    started = time.process_time()
    for _ in range(requests):
        await call(app, "/api/agents")
    return requests / (time.process_time() - started)


def layer_of(filename: str) -> str:
    for layer, marker in LAYERS:
        if marker in filename:
            return layer
    return "other (python builtins, uuid, typing, …)"


async def main(requests: int, profile: bool, top: int) -> None:
    with tempfile.TemporaryDirectory() as data:
        app = build_opencrab(data)
        async with app.router.lifespan_context(app):
            status, body = await call(app, "/api/agents")
            assert status == 200, (status, body[:300])
            bare = build_bare(body)
            status, bare_body = await call(bare, "/api/agents")
            assert (status, bare_body) == (200, body)
            ours = max([await rate(app, requests) for _ in range(2)])
            baseline = max([await rate(bare, requests) for _ in range(2)])
            print(f"GET /api/agents in-process ({AGENTS} agents, {requests} requests, best of 2)")
            print(f"  OpenCrab        {ours:8.0f} req/s  {1e6 / ours:6.1f} µs per request")
            print(f"  bare Starlette  {baseline:8.0f} req/s  {1e6 / baseline:6.1f} µs per request")
            print(f"  ratio OpenCrab / bare Starlette: {ours / baseline:.2f}")
            if not profile:
                return
            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
            for _ in range(requests):
                await call(app, "/api/agents")
            profiler.disable()
        stats = pstats.Stats(profiler)
        by_layer: dict[str, float] = defaultdict(float)
        total = 0.0
        rows = []
        entries = stats.stats  # type: ignore[attr-defined]
        for (filename, line, name), (_, calls, own, _cum, callers) in entries.items():
            total += own
            rows.append((own, calls, f"{Path(filename).name}:{line}({name})", filename))
            if filename != "~" or not callers:
                by_layer[layer_of(filename)] += own
                continue
            # a builtin (dict.get, isinstance, sqlite3's execute): its time goes to the
            # layers that called it, as much as each caller spent in it
            for caller, (_, _, spent, _) in callers.items():
                by_layer[layer_of(caller[0])] += spent
        print(f"\ncProfile, own time by layer ({requests} requests; shares of the profiled total)")
        print("(a builtin's time counts for the layer that called it)")
        for layer, own in sorted(by_layer.items(), key=lambda item: -item[1]):
            print(f"  {own / total:6.1%}  {own / requests * 1e6:7.1f} µs/req  {layer}")
        print(f"\ntop {top} functions by own time")
        for own, calls, where, filename in sorted(rows, reverse=True)[:top]:
            print(
                f"  {own / requests * 1e6:7.2f} µs/req  {calls / requests:6.1f} calls/req  "
                f"{where}  [{layer_of(filename)}]"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.profile, args.top))
