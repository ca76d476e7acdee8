"""execute_command's limits, boxed (bubblewrap) and unboxed alike: the workspace quota and
file cap hold for what a command writes; processes, memory and CPU time are capped."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from opencrab.actions.base import ActionContext
from opencrab.core.workspace import MB
from tests.actions.conftest import Call


@pytest.fixture(params=["bwrap", "none"])
def sandbox(request: pytest.FixtureRequest, ctx: ActionContext) -> str:
    """Each test runs inside bubblewrap and without it (the fallback when it is missing)."""
    mode: str = request.param
    if mode == "bwrap":
        assert shutil.which("bwrap"), "bubblewrap is missing: `make test` installs it (apt-get)"
    ctx.settings.tools.sandbox = mode  # type: ignore[assignment]
    return mode


@pytest.fixture
def small(ctx: ActionContext, enable: Callable[..., None], sandbox: str) -> ActionContext:
    """execute_command switched on in a 10 MB, 500-file workspace."""
    enable(execute_command=True)
    ctx.workspace.max_size_bytes = 10 * MB
    ctx.workspace.max_files = 500
    return ctx


def _files(root: Path) -> dict[str, int]:
    return {
        str(path.relative_to(root)): path.stat().st_size
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


async def test_a_file_cannot_grow_past_what_is_left_of_the_quota(
    call: Call, small: ActionContext
) -> None:
    small.workspace.write("earlier.bin", b"e" * MB)
    result = await call("execute_command", command="head -c 12000000 /dev/zero > huge.bin")
    assert result.data["exit_code"] != 0, result.data  # stopped at the limit (SIGXFSZ)
    files = _files(small.workspace.root)
    assert files == {"earlier.bin": MB, "huge.bin": 9 * MB}, files


async def test_writing_over_the_quota_fails_and_removes_the_newest_files_it_added(
    call: Call, small: ActionContext
) -> None:
    small.workspace.write("earlier.bin", b"e" * MB)
    small.workspace.write("notes/earlier.md", "# kept\n")
    line = "for i in 1 2 3 4 5; do head -c 4194304 /dev/zero > big$i.bin; done; echo done"
    result = await call("execute_command", command=line)
    assert not result.success
    error = result.error or ""
    assert "[agent] max_workspace_size_mb" in error, error
    assert "big5.bin" in error
    files = _files(small.workspace.root)
    assert files == {
        "earlier.bin": MB,
        "notes/earlier.md": 7,
        "big1.bin": 4 * MB,
        "big2.bin": 4 * MB,
    }, files
    assert sum(files.values()) <= 10 * MB
    assert small.workspace.reconcile_usage().bytes == sum(files.values())


async def test_creating_over_the_file_cap_fails_and_keeps_the_earlier_files(
    call: Call, small: ActionContext
) -> None:
    earlier = {f"earlier/{n}.txt": f"earlier {n}\n" for n in range(10)}
    for path, text in earlier.items():
        small.workspace.write(path, text)
    line = "i=0; while [ $i -lt 800 ]; do echo $i > f$i.txt; i=$((i+1)); done; echo done"
    result = await call("execute_command", command=line)
    assert not result.success
    assert "[agent] max_workspace_files" in (result.error or ""), result.error
    files = _files(small.workspace.root)
    assert len(files) == 500
    for path, text in earlier.items():
        assert small.workspace.read(path) == text
    assert small.workspace.reconcile_usage().files == 500


async def test_a_fork_bomb_is_stopped_and_the_server_goes_on(
    call: Call, ctx: ActionContext, enable: Callable[..., None], sandbox: str
) -> None:
    enable(execute_command=True)
    bomb = (
        "python3 -c '\n"
        "import os, time\n"
        "made = 0\n"
        "try:\n"
        "    for _ in range(3000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(6)\n"
        "            os._exit(0)\n"
        "        made += 1\n"
        "except OSError as exc:\n"
        '    print("refused after", made, type(exc).__name__)\n'
        "'"
    )
    result = await call("execute_command", command=bomb, timeout_secs=120)
    assert result.success, result.error
    out = result.data["stdout"].split()
    assert out[:2] == ["refused", "after"], result.data
    assert int(out[2]) <= ctx.settings.tools.command_max_processes
    assert subprocess.run(["true"], check=False).returncode == 0  # the server can still fork


async def test_a_1_gib_allocation_fails_inside_the_command(
    call: Call, enable: Callable[..., None], sandbox: str
) -> None:
    enable(execute_command=True)
    line = "python3 -c 'data = bytes(1 << 30); print(\"allocated\", len(data))'"
    result = await call("execute_command", command=line)
    assert result.success, result.error
    assert result.data["exit_code"] != 0, result.data
    assert "MemoryError" in result.data["stderr"]
    assert "allocated" not in result.data["stdout"]


async def test_cpu_time_is_capped(
    call: Call, ctx: ActionContext, enable: Callable[..., None], sandbox: str
) -> None:
    enable(execute_command=True)
    ctx.settings.tools.command_max_cpu_secs = 1
    result = await call(
        "execute_command", command="python3 -c 'while True: pass'", timeout_secs=600
    )
    assert result.success, result.error
    assert result.data["timed_out"] is False  # stopped by its CPU limit, long before
    assert result.data["exit_code"] != 0, result.data


async def test_a_command_dumps_no_core_into_the_workspace(
    call: Call, ctx: ActionContext, enable: Callable[..., None], sandbox: str
) -> None:
    enable(execute_command=True)
    result = await call(
        "execute_command", command="ulimit -c unlimited; python3 -c 'import os; os.abort()'"
    )
    assert result.data["exit_code"] != 0
    assert not [p for p in os.listdir(ctx.workspace.root) if p.startswith("core")]
