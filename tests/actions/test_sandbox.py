"""execute_command inside the real bubblewrap (`make test` installs it): no network, only
the workspace writable, the server's files out of reach."""

from __future__ import annotations

import os
import shutil
import socket
import uuid
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


# ------------------------------------------------------------ a server running as root


def _command_uid(ctx: ActionContext) -> int:
    """The uid a command runs as: [tools] command_uid when the server is root, else its own."""
    return ctx.settings.tools.command_uid if os.geteuid() == 0 else os.getuid()


async def test_the_command_has_no_capabilities_and_is_not_root(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    result = await call(
        "execute_command", command="grep -E '^(Cap|Uid|Gid|NoNewPrivs)' /proc/self/status"
    )
    assert result.success, result.error
    status = dict(line.split(":", 1) for line in result.data["stdout"].splitlines())
    for capability in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[capability], 16) == 0, (capability, result.data)
    uid = _command_uid(ctx)
    assert status["Uid"].split() == [str(uid)] * 4, result.data
    assert status["Gid"].split()[0] != "0" or os.geteuid() != 0, result.data
    assert status["NoNewPrivs"].strip() == "1"


async def test_a_remount_cannot_make_the_system_writable(
    call: Call, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    probes = [Path(top) / f"opencrab-remount-{uuid.uuid4().hex}" for top in ("/usr", "/etc")]
    line = "; ".join(
        f"mount -o remount,rw,bind {probe.parent} && echo remounted {probe.parent}; "
        f"touch {probe} && echo wrote {probe}"
        for probe in probes
    )
    try:
        result = await call("execute_command", command=line)
        assert result.success, result.error
        assert "remounted" not in result.data["stdout"], result.data
        assert "wrote" not in result.data["stdout"], result.data
        assert not any(probe.exists() for probe in probes)
    finally:
        for probe in probes:
            probe.unlink(missing_ok=True)


async def test_the_systems_secrets_are_not_there(call: Call, enable: Callable[..., None]) -> None:
    assert Path("/etc/shadow").exists()  # Debian has it: the probe below means something
    enable(execute_command=True)
    line = (
        "cat /etc/shadow /etc/gshadow /etc/sudoers /etc/ssl/private/* /etc/ssh/*_key; "
        "ls -a /etc /etc/ssl; echo; cat /etc/passwd"
    )
    result = await call("execute_command", command=line)
    assert result.success, result.error
    out = result.data["stdout"]
    assert "root:" in out  # /etc/passwd is there, with the few entries a command needs
    listed = set(out.split())
    assert not listed & {"shadow", "gshadow", "sudoers", "private", "ssh", "npmrc", "pip.conf"}
    assert "PRIVATE KEY" not in out
    passwd = [line for line in out.splitlines() if line.count(":") == 6]
    assert len(passwd) <= 2, passwd  # root, and the command's own user


async def test_nothing_outside_the_workspace_can_be_written(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    name = f"opencrab-probe-{uuid.uuid4().hex}"
    tops = ["/usr", "/usr/local", "/etc", "/tmp", "/root", "/var", "/home", "/opt", "/", "/dev"]
    line = "; ".join(f"touch {top.rstrip('/')}/{name} && echo wrote {top}" for top in tops)
    line += (
        "; v=$(cat /proc/sys/vm/swappiness); echo $v > /proc/sys/vm/swappiness "
        "&& echo wrote /proc/sys; echo x > /proc/sysrq-trigger 2>/dev/null && echo wrote sysrq"
        f"; touch {ctx.workspace.root.parent}/{name} && echo wrote the data dir"
    )
    try:
        result = await call("execute_command", command=line)
        assert result.success, result.error
        wrote = result.data["stdout"].splitlines()
        assert wrote == ["wrote /tmp"], result.data  # its own private /tmp, nothing else
        assert not [top for top in tops if Path(top, name).exists()]
        assert not (ctx.workspace.root.parent / name).exists()
    finally:
        for top in tops:
            Path(top, name).unlink(missing_ok=True)


async def test_python_git_and_ls_work_in_the_workspace(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    line = (
        'python3 -c \'open("py.txt", "w").write("from python")\' && '
        "git init -q repo && cd repo && echo hi > a.txt && git add a.txt && "
        "git -c user.name=crab -c user.email=crab@example.invalid commit -qm first && "
        "git log --format=%s && ls -a && whoami && echo home=$HOME"
    )
    result = await call("execute_command", command=line)
    assert result.success, result.error
    assert result.data["exit_code"] == 0, result.data
    out = result.data["stdout"].split()
    assert out[0] == "first"
    assert {".git", "a.txt"} <= set(out)
    assert "home=/workspace" in out
    ws = ctx.workspace
    assert ws.read("py.txt") == "from python"
    assert ws.read("repo/a.txt") == "hi\n"
    ws.delete("repo")  # the server deletes what the command made, .git's read-only objects too
    assert not ws.exists("repo")


async def test_the_server_and_the_command_share_the_workspace_files(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    """Files the server wrote stay writable for the command; what the command wrote and
    locked (mode 000) stays readable and deletable for the server."""
    enable(execute_command=True)
    ws = ctx.workspace
    ws.write("server.md", "from the server\n")
    ws.mkdir("server-dir")
    line = (
        "echo from the command >> server.md && echo made > server-dir/made.txt && "
        "mkdir -p locked/in && echo hidden > locked/in/f.txt && chmod 000 locked/in/f.txt "
        "locked/in locked server.md"
    )
    result = await call("execute_command", command=line)
    assert result.success, result.error
    assert result.data["exit_code"] == 0, result.data
    assert ws.read("server.md") == "from the server\nfrom the command\n"
    assert ws.read("locked/in/f.txt") == "hidden\n"
    made = ws.root / "server-dir" / "made.txt"
    assert made.stat().st_uid == _command_uid(ctx)  # the command's own file
    ws.write("server-dir/made.txt", "rewritten by the server\n")
    ws.delete("locked")
    assert not ws.exists("locked")
    again = await call(
        "execute_command", command="cat server-dir/made.txt && echo more >> server-dir/made.txt"
    )
    assert again.data["exit_code"] == 0, again.data
    assert again.data["stdout"] == "rewritten by the server\n"
    assert ws.read("server-dir/made.txt") == "rewritten by the server\nmore\n"


async def test_the_private_tmp_is_size_limited(
    call: Call, ctx: ActionContext, enable: Callable[..., None]
) -> None:
    enable(execute_command=True)
    size = 64 * 1024 * 1024  # [tools] command_tmp_size_mb's default
    line = f"head -c {size + 16 * 1024 * 1024} /dev/zero > /tmp/big; stat -c %s /tmp/big"
    result = await call("execute_command", command=line)
    assert result.success, result.error
    assert "No space left on device" in result.data["stderr"], result.data
    assert int(result.data["stdout"]) <= size
