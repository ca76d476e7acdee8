"""execute_command inside the real bubblewrap (`make test` installs it): no network, only
the workspace writable, the server's files out of reach."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from opencrab.actions.base import ActionContext
from tests.actions.conftest import Call


@pytest.fixture
def listening() -> Iterator[int]:
    """A TCP port on loopback that accepts connections (outside the sandbox)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture(autouse=True)
def bwrap_installed() -> None:
    assert shutil.which("bwrap"), "bubblewrap is missing: `make test` installs it (apt-get)"


async def test_the_command_runs_boxed_in_the_workspace(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    result = await call("execute_command", command="pwd; echo made > made.txt; cat made.txt")
    assert result.success, result.error
    assert result.data["sandbox"] == "bwrap"
    assert "warning" not in result.data
    assert result.data["stdout"] == "/workspace\nmade\n"
    assert (ctx.workspace.root / "made.txt").read_text() == "made\n"


async def test_the_network_is_out_of_reach(
    call: Call, enable: Callable[..., None], listening: int
) -> None:
    enable(execute_command=True)
    probe = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{listening}), timeout=5); print('connected')\""
    )
    result = await call("execute_command", command=probe)
    assert result.success, result.error  # the command ran; its connection did not
    assert result.data["exit_code"] != 0, result.data
    assert "connected" not in result.data["stdout"]
    outside = await call("execute_command", command=probe.replace("python3 -c", "echo"))
    assert outside.data["exit_code"] == 0  # the same line without connecting runs fine


async def test_only_the_workspace_is_writable_and_the_servers_files_are_hidden(
    call: Call, ctx: ActionContext, enable: Callable[..., None], tmp_path: Path
) -> None:
    enable(execute_command=True)
    secret = tmp_path / "secret.txt"  # a server file outside the workspace
    secret.write_text("the server's")
    target = tmp_path / "escaped.txt"
    line = f"touch {target}; touch /usr/escaped; cat {secret}; echo done"
    result = await call("execute_command", command=line)
    assert result.success, result.error
    assert result.data["stdout"] == "done\n"
    assert not target.exists()
    assert not Path("/usr/escaped").exists()
    assert "the server's" not in result.data["stdout"] + result.data["stderr"]
