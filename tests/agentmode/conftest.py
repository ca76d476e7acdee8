"""Agent-mode fixtures: a private tmux server per test (leak-checked at teardown)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from opencrab.agentmode.tmux import TmuxServer
from tests.fakes.private_tmux import private_tmux


@pytest.fixture
async def tmux_server() -> AsyncIterator[TmuxServer]:
    """A tmux server on a unique socket; no server or child process may outlive the test."""
    async with private_tmux() as server:
        yield server
