"""`opencrab up` as root: no open API on a TCP port, and a Unix socket for the owner alone.

Run as root (as the suite is, here and in CI) the commands are the real CLI as a root
user runs it; a developer who is not root gets a user namespace where they are root
(`unshare --map-root-user`), which is what `os.geteuid()` reports.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.ports import closed_port, free_port
from tests.fakes.served import as_root, start_up, stop_up

EXE = str(Path(sys.executable).parent / "opencrab")


@pytest.fixture
def env() -> dict[str, str]:
    """No model is loaded or looked for (nothing listens on those ports)."""
    found = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    closed = f"http://127.0.0.1:{closed_port()}"
    found.update(OPENAI_API_KEY="sk-test", OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL=closed)
    found["OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    found["OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    return found


def test_root_without_a_token_refuses_and_the_command_it_names_leads_to_the_dashboard(
    tmp_path: Path, env: dict[str, str]
) -> None:
    data = tmp_path / "data"
    port = free_port()
    env["OPENCRAB_DASHBOARD__PORT"] = str(port)
    refused = subprocess.run(
        as_root([EXE, "up", "--port", str(port), "--data-dir", str(data)]),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "running as root needs bearer tokens and there are none" in said
    assert f"sign in at http://127.0.0.1:{port}/login" in said
    assert f"up --socket PATH --data-dir {data}" in said

    # the user runs the command exactly as printed, then starts again
    command = re.search(r"`([^`]*token create admin[^`]*)`", said)
    assert command is not None, said
    assert shlex.split(command.group(1))[0] == EXE
    made = subprocess.run(
        as_root(shlex.split(command.group(1))), env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("ocb_")

    base = f"http://127.0.0.1:{port}"
    server = start_up(["--port", str(port), "--data-dir", str(data)], env, base, root=True)
    try:
        assert httpx.get(f"{base}/api/agents", timeout=60).status_code == 401
        page = httpx.get(f"{base}/", timeout=60)
        assert page.status_code == 303
        assert page.headers["location"].startswith("/login")
        signed_in = httpx.post(f"{base}/login", data={"token": secret, "next": "/"}, timeout=60)
        assert signed_in.status_code == 303
        home = httpx.get(f"{base}/", cookies=signed_in.cookies, timeout=60)
        assert home.status_code == 200
        bearer = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(f"{base}/api/agents", headers=bearer, timeout=60).status_code == 200
    finally:
        output = stop_up(server)
    assert "bearer token required" in " ".join(output.split())
    # the banner's lines are never cut inside a word or a path at 80 columns
    assert f"\nData: {data}\n" in output
    assert f"on http://127.0.0.1:{port} (bearer token required)\n" in output


def test_off_loopback_without_a_token_is_refused_naming_the_setting(
    tmp_path: Path, env: dict[str, str]
) -> None:
    refused = subprocess.run(
        [EXE, "up", "--host", "0.0.0.0", "--data-dir", str(tmp_path / "d")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2
    assert "gateway.rest.host: refusing to start: binding 0.0.0.0" in said
    assert "token create admin --data-dir" in said
    assert "Traceback" not in refused.stderr


def test_a_unix_socket_serves_root_without_a_token_and_no_other_user(
    tmp_path: Path, env: dict[str, str]
) -> None:
    data = tmp_path / "data"
    shared = Path(tempfile.mkdtemp(prefix="opencrab-sock-"))
    shared.chmod(0o755)  # others may reach the folder: only the socket's mode stops them
    path = shared / "crab.sock"
    server = subprocess.Popen(
        as_root([EXE, "up", "--socket", str(path), "--data-dir", str(data)]),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        umask=0o022,  # a usual umask: the socket is 0600 all the same
    )
    client = httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), timeout=60)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("http://localhost/api/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            assert time.monotonic() < deadline, "no answer on the socket in 60 s"
            time.sleep(0.1)
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        assert stat.S_ISSOCK(path.lstat().st_mode)
        agents = client.get("http://localhost/api/agents")
        assert agents.status_code == 200, agents.text  # no token needed on the socket
        made = client.post("http://localhost/api/agents", json={"name": "aki", "prompt": "Hi."})
        assert made.status_code == 201, made.text
        if os.geteuid() == 0:  # another local user cannot even connect
            other = subprocess.run(
                ["/usr/bin/python3", "-c", _CONNECT, str(path)],
                user=65534,
                group=65534,
                capture_output=True,
                text=True,
            )
            assert other.returncode == 3, other.stdout + other.stderr
        again = subprocess.run(  # a second server on the same socket is refused
            as_root([EXE, "up", "--socket", str(path), "--data-dir", str(tmp_path / "b")]),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 2
        assert "a server is already listening on this socket" in " ".join(again.stderr.split())
    finally:
        client.close()
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    assert server.returncode in (0, -signal.SIGTERM), output
    said = " ".join(output.split())
    assert "on the Unix socket" in said
    assert "bearer token not required" in said
    assert not path.exists()  # removed at shutdown
    shutil.rmtree(shared)


def test_a_socket_path_holding_a_file_is_refused_and_the_file_kept(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("mine", encoding="utf-8")
    refused = subprocess.run(
        [EXE, "up", "--socket", str(path), "--data-dir", str(tmp_path / "d")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "exists and is not a socket" in " ".join(refused.stderr.split())
    assert path.read_text(encoding="utf-8") == "mine"


_CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except PermissionError:
    sys.exit(3)
sys.exit(0)
"""


def test_a_unix_listener_is_never_open_to_others(tmp_path: Path) -> None:
    """Bound under umask 0177: no moment when the socket file is wider than 0600."""
    from opencrab.cli.up import unix_listener

    before = os.umask(0o000)
    try:
        listener = unix_listener(tmp_path / "s.sock")
    finally:
        os.umask(before)
    try:
        assert stat.S_IMODE((tmp_path / "s.sock").lstat().st_mode) == 0o600
        assert os.umask(before) == before  # the process's umask is given back
        with socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(tmp_path / "s.sock"))
    finally:
        listener.close()


def test_a_busy_port_is_named_without_a_traceback(tmp_path: Path, env: dict[str, str]) -> None:
    data = tmp_path / "data"
    made = subprocess.run(
        as_root([EXE, "token", "create", "admin", "--data-dir", str(data)]),
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env["OPENCRAB_DASHBOARD__PORT"] = str(port)
        refused = subprocess.run(
            as_root([EXE, "up", "--port", str(port), "--data-dir", str(data)]),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in said
    assert "--port" in said
