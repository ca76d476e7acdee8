"""Uploads over a real socket: streamed to disk, reserved against the quota before they
are written (parallel uploads stay within it), the file-count cap, nothing partial left."""

from __future__ import annotations

import asyncio
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from opencrab.config import Settings
from opencrab.core.workspace import MB, Workspace
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of


@pytest.fixture
def served(settings: Settings, db: Database) -> Iterator[tuple[str, str]]:
    """The app on a real socket in this process; yields (base URL, workspace URL)."""
    settings.agent.max_workspace_size_mb = 10
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai"))
    with SocketServer(create_app(settings, db, router=router)) as base:
        agent = httpx.post(f"{base}/api/agents", json={"name": "aki", "prompt": "Hi."}, timeout=60)
        assert agent.status_code == 201, agent.text
        yield base, f"{base}/api/agents/{agent.json()['id']}/workspace"


class SocketServer:
    """A uvicorn server in a thread on a free port; `with` gives its base URL."""

    def __init__(self, app: object) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical")  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive(), "server stopped"
            assert time.monotonic() < deadline, "server did not start in 30 s"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def workspace_root(settings: Settings, url: str) -> Path:
    return Workspace.for_agent(settings, url.rsplit("/", 2)[-2]).root


def leftovers(root: Path) -> list[str]:
    """Files of an upload in progress or given up, in or beside the workspace."""
    found = [p.name for p in root.rglob("*.part")]
    found += [p.name for p in root.parent.glob(".*uploads*/*")]
    return found


async def gated_body(size: int, chunk: bytes, ready: list[int], goal: int) -> AsyncIterator[bytes]:
    """`size` bytes; after the first chunk, waits until `goal` bodies have started."""
    sent = 0
    first = True
    while sent < size:
        piece = chunk[: size - sent]
        yield piece
        sent += len(piece)
        if first:
            first = False
            ready.append(1)
            while len(ready) < goal:
                await asyncio.sleep(0.01)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_parallel_uploads_near_the_quota_stay_within_it(
    served: tuple[str, str], settings: Settings, declared: bool
) -> None:
    _, url = served
    size = 4 * MB  # four of them in a 10 MB workspace: two fit
    chunk = b"u" * (256 * 1024)
    ready: list[int] = []

    async def upload(client: httpx.AsyncClient, n: int) -> httpx.Response:
        headers = {"Content-Length": str(size)} if declared else {}
        body = gated_body(size, chunk, ready, 4)
        return await client.put(f"{url}/up{n}.bin", content=body, headers=headers)

    async with httpx.AsyncClient(timeout=60) as client:
        responses = await asyncio.gather(*(upload(client, n) for n in range(4)))
        listing = (await client.get(url)).json()

    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {201, 413}
    if declared:  # the reservation is made from Content-Length, before any byte is read
        assert statuses == [201, 201, 413, 413]
    # without it, each piece is reserved as it comes: which ones fit depends on the order
    for response in responses:
        if response.status_code == 413:
            message = error_of(response, 413, "quota_exceeded")
            assert "quota of 10485760 bytes" in message
    stored = {e["name"]: e["size"] for e in listing["entries"]}
    assert set(stored.values()) <= {size}  # whole files only
    assert len(stored) == statuses.count(201)
    assert listing["usageBytes"] == sum(stored.values()) <= 10 * MB
    root = workspace_root(settings, url)
    assert sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) <= 10 * MB
    assert leftovers(root) == []


async def test_an_upload_in_flight_holds_its_reservation(
    served: tuple[str, str], settings: Settings
) -> None:
    _, url = served
    started = asyncio.Event()
    finish = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b"a" * (3 * MB)
        started.set()
        await finish.wait()
        yield b"a" * (3 * MB)

    async with httpx.AsyncClient(timeout=60) as client:
        first = asyncio.create_task(
            client.put(
                f"{url}/first.bin", content=slow_body(), headers={"Content-Length": str(6 * MB)}
            )
        )
        await started.wait()
        root = workspace_root(settings, url)
        while not leftovers(root):  # the server has reserved the room and opened its file
            await asyncio.sleep(0.01)
        # 6 MB are promised to the first upload: 5 more would go over 10 MB
        second = await client.put(f"{url}/second.bin", content=b"b" * (5 * MB))
        finish.set()
        assert (await first).status_code == 201
    assert "over its quota" in error_of(second, 413, "quota_exceeded")
    assert sorted(p.name for p in root.iterdir()) == ["first.bin"]
    assert leftovers(root) == []


async def test_an_upload_streams_to_disk_without_holding_the_body(
    served: tuple[str, str], settings: Settings
) -> None:
    _, url = served
    settings.agent.max_workspace_size_mb = 64
    size = 32 * MB
    chunk = b"s" * (64 * 1024)

    async def body() -> AsyncIterator[bytes]:
        for _ in range(size // len(chunk)):
            yield chunk  # the same object each time: the client holds 64 KB

    tracemalloc.start()
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.put(f"{url}/big.bin", content=body())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 201, response.text
    assert (workspace_root(settings, url) / "big.bin").stat().st_size == size
    assert peak < size // 8  # never the whole body (or a copy of it) in memory


async def test_a_chunked_upload_over_the_quota_leaves_nothing_behind(
    served: tuple[str, str], settings: Settings
) -> None:
    _, url = served
    chunk = b"q" * MB

    async def body() -> AsyncIterator[bytes]:
        for _ in range(12):  # 12 MB, no Content-Length: refused while it arrives
            yield chunk

    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.put(f"{url}/deep/folder/too-big.bin", content=body())
        assert (await client.put(f"{url}/after.txt", content=b"still fine")).status_code == 201
    assert "quota" in error_of(response, 413, "quota_exceeded")
    root = workspace_root(settings, url)
    assert sorted(p.name for p in root.rglob("*")) == ["after.txt"]
    assert leftovers(root) == []


def test_the_file_count_cap_refuses_new_files_with_a_clear_error(
    served: tuple[str, str], settings: Settings
) -> None:
    _, url = served
    settings.agent.max_workspace_files = 3
    for n in range(3):
        assert httpx.put(f"{url}/f{n}.txt", content=b"x", timeout=60).status_code == 201
    refused = httpx.put(f"{url}/f3.txt", content=b"x", timeout=60)
    message = error_of(refused, 413, "quota_exceeded")
    assert "3 files" in message
    assert "[agent] max_workspace_files" in message
    replaced = httpx.put(f"{url}/f0.txt", content=b"replaced", timeout=60)
    assert replaced.status_code == 200  # not a new file
    assert httpx.delete(f"{url}/f1.txt", timeout=60).status_code == 204
    assert httpx.put(f"{url}/f3.txt", content=b"x", timeout=60).status_code == 201
