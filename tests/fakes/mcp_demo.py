"""The demo MCP server (tests/fakes/mcp_demo_server.py, the official SDK's MCPServer) as
the tests and bench scripts run it: over stdio as a `[mcp.servers.<name>]` table, or
over streamable HTTP in its own process on 127.0.0.1.

    with demo_over_http() as url:  # http://127.0.0.1:<port>/mcp
        ...
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opencrab.config.mcp import McpServerConfig
from tests.fakes.ports import free_port

DEMO = Path(__file__).parent / "mcp_demo_server.py"


def demo_stdio(**table: Any) -> McpServerConfig:
    """The demo server over stdio; what the box must let it read: this Python, its
    virtualenv and the script's folder."""
    paths = sorted({sys.prefix, sys.base_prefix, str(DEMO.parent)})
    return McpServerConfig(command=sys.executable, args=[str(DEMO)], read_paths=paths, **table)


def serve_demo(port: int) -> subprocess.Popen[bytes]:
    """The demo server over streamable HTTP on 127.0.0.1:`port`, once it listens."""
    process = subprocess.Popen(
        [sys.executable, str(DEMO), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):  # until it listens (or died)
        assert process.poll() is None, "the demo server exited"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError("the demo server did not listen")


@contextmanager
def demo_over_http(port: int | None = None) -> Iterator[str]:
    """The demo server's streamable HTTP endpoint, served by its own process on `port`
    (a free one by default) until the block ends."""
    port = port or free_port()
    process = serve_demo(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)
