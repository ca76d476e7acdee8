"""Agent-mode fixtures: a private HOME (so `~/.gwt/sessions` never reaches the real one)
and a private tmux server per test (leak-checked at teardown)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from opencrab.agentmode.tmux import TmuxServer
from tests.fakes.private_tmux import private_tmux


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME for the test (the default sessions directory lives under it)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
async def tmux_server() -> AsyncIterator[TmuxServer]:
    """A tmux server on a unique socket; no server or child process may outlive the test."""
    async with private_tmux() as server:
        yield server
