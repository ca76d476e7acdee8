"""An ASGI app on a real loopback socket, served by uvicorn from a thread of the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_in_thread(app: Any, port: int, **options: Any) -> Iterator[str]:
    """Serve `app` on 127.0.0.1:`port` until the block ends; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "server stopped"
        assert time.monotonic() < deadline, "server did not start in 30 s"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
