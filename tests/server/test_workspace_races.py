"""A workspace under concurrent uploads over a real socket: files appearing and vanishing
during a tree scan never turn into a 500 (issue 17 §6)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from opencrab.config import Settings
from opencrab.core.workspace import Workspace
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.ports import free_port
from tests.fakes.threaded_server import serve_in_thread

UPLOADS = 300


@pytest.fixture
def served(settings: Settings, db: Database) -> Iterator[str]:
    """The app on a real loopback socket, served from a thread of this process."""
    app = create_app(settings, db)
    # a pooled connection is never closed under the client
    with serve_in_thread(app, free_port(), timeout_keep_alive=300) as url:
        yield url


async def test_concurrent_uploads_into_one_workspace_never_fail_with_500(
    served: str, settings: Settings
) -> None:
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=served, limits=limits, timeout=120) as api:
        created = await api.post("/api/agents", json={"name": "aki", "prompt": "Hi."})
        agent_id = created.json()["id"]

        async def upload(n: int) -> int:
            # a few folders, so scans cross folders being filled at the same time
            path = f"/api/agents/aki/workspace/d{n % 4}/f{n}.txt"
            response = await api.put(path, content=b"x" * (n % 7 + 1) * 512)
            return response.status_code

        async def listing() -> int:
            return (await api.get("/api/agents/aki/workspace")).status_code

        statuses = await asyncio.gather(
            *(upload(n) for n in range(UPLOADS)), *(listing() for _ in range(UPLOADS // 10))
        )
    assert Counter(statuses) == Counter({201: UPLOADS, 200: UPLOADS // 10})
    workspace = Workspace.for_agent(settings, agent_id)
    assert len(list(workspace.walk())) == UPLOADS
