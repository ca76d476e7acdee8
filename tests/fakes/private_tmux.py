"""A private tmux server for one test: a unique socket, torn down with a leak check.

    async with private_tmux() as server:
        pane = await server.open_pane([...], cwd=tmp_path)

On the way out every process under the server is recorded, the server is killed, and the
check fails when the server or any of those processes is still alive.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from opencrab.agentmode.tmux import TmuxServer, process_tree


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """The pids still alive after waiting up to `timeout` seconds for them to go."""
    deadline = time.monotonic() + timeout
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left


@asynccontextmanager
async def private_tmux() -> AsyncIterator[TmuxServer]:
    """A TmuxServer on a fresh socket; fails on exit if it or its processes leak."""
    server = TmuxServer(f"oc-test-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield server
    finally:
        server_pid = await server.server_pid()
        under = process_tree(server_pid) if server_pid else set()
        await server.kill_server(grace=2.0)
        assert not await server.is_running(), f"tmux server {server.socket} still running"
        folder = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
        assert not list(folder.glob(server.socket))
        left = wait_gone(under)
        assert not left, f"processes left behind by tmux server {server.socket}: {left}"
