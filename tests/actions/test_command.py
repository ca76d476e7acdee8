"""execute_command: off by default, the workspace as its folder, scrubbed, timed, capped."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from opencrab.actions.base import ActionContext
from tests.actions.conftest import Call


@pytest.fixture(autouse=True)
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH without bubblewrap, whether or not the machine has it (tests that want one
    put a fake in this folder): the system's programs linked in one folder, bwrap left out."""
    folder = tmp_path / "bin"
    folder.mkdir()
    system = tmp_path / "system-bin"
    system.mkdir()
    for directory in ("/usr/bin", "/bin"):
        for program in Path(directory).iterdir():
            link = system / program.name
            if program.name != "bwrap" and not link.exists():
                link.symlink_to(program)
    monkeypatch.setenv("PATH", f"{folder}:{system}")
    return folder


async def test_it_is_off_until_switched_on(call: Call, ctx: ActionContext) -> None:
    result = await call("execute_command", command="touch made.txt")
    assert not result.success
    assert "execute_command is switched off for this agent" in (result.error or "")
    assert "tool-settings" in (result.error or "")
    assert not (ctx.workspace.root / "made.txt").exists()


async def test_it_runs_a_shell_line_in_the_workspace(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    result = await call("execute_command", command="pwd; echo hi > out.txt && cat out.txt; exit 3")
    assert result.success, result.error
    data = result.data
    assert data["stdout"].splitlines() == [str(ctx.workspace.root), "hi"]
    assert data["exit_code"] == 3
    assert data["timed_out"] is False
    assert (ctx.workspace.root / "out.txt").read_text() == "hi\n"
    # without bubblewrap it runs unboxed and says so
    assert data["sandbox"] == "none"
    assert "without a sandbox" in data["warning"]


async def test_the_environment_is_scrubbed(
    call: Call, enable: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("OPENCRAB_TEST_SECRET", "hunter2")
    enable(execute_command=True)
    result = await call("execute_command", command="env")
    assert "sk-very-secret" not in result.data["stdout"]
    assert "hunter2" not in result.data["stdout"]
    names = {line.split("=", 1)[0] for line in result.data["stdout"].splitlines()}
    assert names <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_"}


async def test_the_timeout_kills_the_command_and_its_children(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    result = await call(
        "execute_command",
        command="sleep 600 & echo $! > child.pid; sleep 600",
        timeout_secs=1,
    )
    assert result.success, result.error
    assert result.data["timed_out"] is True
    assert result.data["exit_code"] is None
    assert "timeout" in result.data["error"]
    child = int((ctx.workspace.root / "child.pid").read_text())
    assert _gone(child)


async def test_background_processes_do_not_outlive_the_command(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    result = await call(
        "execute_command", command="sleep 600 >/dev/null 2>&1 & echo $! > child.pid"
    )
    assert result.data["exit_code"] == 0
    assert _gone(int((ctx.workspace.root / "child.pid").read_text()))


async def test_output_is_capped(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    ctx.settings.tools.command_max_output_bytes = 1000
    result = await call("execute_command", command="yes crab | head -c 200000; echo done >&2")
    data = result.data
    assert len(data["stdout"]) == 1000
    assert data["stdout_truncated"] is True
    assert data["stderr"] == "done\n"
    assert data["stderr_truncated"] is False
    assert data["exit_code"] == 0


async def test_bubblewrap_is_used_when_installed(
    call: Call, ctx: ActionContext, enable: Callable[..., None], no_bwrap: Path
) -> None:
    """A stand-in `bwrap` on PATH records the command line it is given."""
    record = ctx.workspace.root.parent / "bwrap-argv.txt"
    fake = no_bwrap / "bwrap"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\necho boxed\n')
    fake.chmod(0o755)
    enable(execute_command=True)
    result = await call("execute_command", command="curl http://example.org")
    assert result.data["sandbox"] == "bwrap"
    assert "warning" not in result.data
    assert result.data["stdout"] == "boxed\n"
    argv = record.read_text().splitlines()
    assert {"--unshare-net", "--unshare-pid", "--unshare-ipc"} <= set(argv) or (
        "--unshare-all" in argv and os.geteuid() != 0  # root: no user namespace (sandbox.py)
    )
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--die-with-parent" in argv
    bind = argv.index("--bind")
    assert argv[bind + 1 : bind + 3] == [str(ctx.workspace.root), "/workspace"]
    assert argv.count("--bind") == 1  # the only writable place
    assert argv[-3:] == ["/bin/sh", "-c", "curl http://example.org"]


async def test_a_required_sandbox_that_is_missing_refuses(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    ctx.settings.tools.sandbox = "bwrap"
    result = await call("execute_command", command="touch made.txt")
    assert not result.success
    assert "bubblewrap (bwrap) is not installed" in (result.error or "")
    assert not (ctx.workspace.root / "made.txt").exists()


def _gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie waiting for its reaper counts as exited)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    os.kill(pid, 9)
    return False


async def test_unboxed_it_runs_as_an_unprivileged_user_when_the_server_is_root(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    result = await call("execute_command", command="id -u; id -G; grep CapEff /proc/self/status")
    assert result.success, result.error
    uid, groups, caps = result.data["stdout"].splitlines()
    tools = ctx.settings.tools
    if os.geteuid() == 0:
        assert (uid, groups) == (str(tools.command_uid), str(tools.command_gid))
        assert int(caps.split()[1], 16) == 0
    else:
        assert uid == str(os.getuid())
