"""Loopback ports for tests: one to bind a server to, one where nothing listens."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port free right now (the probe that found it is closed again)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def closed_port() -> int:
    """A loopback port nothing listens on: a client connecting there is refused."""
    return free_port()
