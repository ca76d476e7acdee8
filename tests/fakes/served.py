"""`opencrab up` as a user runs it, for tests that need a real server on a real socket.

    with ServedOpenCrab(tmp_path / "data", llm=fake_llm_server) as served:
        httpx.get(served.url + "/api/health")

The server thinks through the fake OpenAI server (`llm`), never through a local model
(the Ollama and llama.cpp URLs point at a closed port); its import roots are the data
directory's parent folder. The tests run as root, where `up` requires a bearer token:
`start()` creates one the way a user does (`opencrab token create`), and
`served.headers` / `served.client()` send it; `served.sign_in(context)` signs a browser
context in through the login form. It is stopped with SIGTERM, and
whatever it printed is in `served.output()` (shown when it fails to start); `kill()`
ends it with SIGKILL instead, as a crash would. `worker=True` runs `opencrab worker`
instead (no HTTP: it counts as started once it says so).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import httpx

from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.ports import free_port

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext

START_SECS = 180
"""How long a server may take to start: minutes on a loaded machine (8 suites on 2 cores)."""


def as_root(command: list[str]) -> list[str]:
    """`command` run with euid 0: as is when the tests run as root (here and in CI), else
    in a user namespace where this user is root (what `os.geteuid()` then reports)."""
    return command if os.geteuid() == 0 else ["unshare", "--map-root-user", *command]


def start_up(
    args: list[str], env: dict[str, str], base: str, *, root: bool = False
) -> subprocess.Popen[str]:
    """Start `opencrab up ARGS` with `env` (as root with `root`); return once `base`
    answers /api/health."""
    exe = str(Path(sys.executable).parent / "opencrab")
    command = [exe, "up", *args]
    server = subprocess.Popen(
        as_root(command) if root else command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + START_SECS
    while True:
        try:
            if httpx.get(f"{base}/api/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        assert server.poll() is None, server.stdout.read() if server.stdout else ""
        assert time.monotonic() < deadline, f"server did not start in {START_SECS} s"
        time.sleep(0.1)


def stop_up(server: subprocess.Popen[str]) -> str:
    """SIGTERM the server; its output once it ended cleanly."""
    server.send_signal(signal.SIGTERM)
    output, _ = server.communicate(timeout=30)
    assert server.returncode in (0, -signal.SIGTERM), output
    return output


def wait_for(what: str, done: Callable[[], bool], secs: float = 90) -> None:
    """Wait (generously) until `done()`; fail naming `what` if it never happens."""
    deadline = time.monotonic() + secs
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def create_token(data_dir: Path, env: dict[str, str], name: str) -> str:
    """A new bearer token for the server on `data_dir`, made as a user makes one."""
    exe = str(Path(sys.executable).parent / "opencrab")
    made = subprocess.run(
        [exe, "token", "create", name, "--json", "--data-dir", str(data_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["token"])


def make_agents(served: ServedOpenCrab, names: list[str], interval: int) -> list[str]:
    """Create `names` over REST with heartbeats every `interval` s; their ids."""
    made = []
    for name in names:
        body = {"name": name, "prompt": "You are terse.", "heartbeat": {"intervalSecs": interval}}
        response = httpx.post(
            served.url + "/api/agents", json=body, headers=served.headers, timeout=30
        )
        assert response.status_code == 201, response.text
        made.append(str(response.json()["id"]))
    return made


class ServedOpenCrab:
    """A real `opencrab up` subprocess on a free loopback port."""

    def __init__(
        self,
        data_dir: Path,
        *,
        llm: FakeLlmServer,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        worker: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.worker = worker
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        closed = f"http://127.0.0.1:{free_port()}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
        self.env.update(
            OPENAI_API_KEY="sk-test",
            OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL=llm.url + "/v1",
            OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL=closed,
            OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL=closed,
            OPENCRAB_DASHBOARD__PORT=str(self.port),  # no second port unless a test asks
            # imports over the API read the test's folders, never ~/.codex or ~/.claude
            OPENCRAB_IMPORTS__ROOTS=json.dumps([str(data_dir.parent)]),
            # background memory embedding as the test has it (tests/conftest.py: off)
            OPENCRAB_AGENT__MEMORY_EMBEDDING=os.environ.get(
                "OPENCRAB_AGENT__MEMORY_EMBEDDING", "false"
            ),
        )
        self.env.update(env or {})
        self.args = args
        self.token = ""
        """The bearer token `start()` created (none for a worker)."""
        self._log: IO[str] | None = None
        self._process: subprocess.Popen[str] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header with this server's token."""
        return {"Authorization": f"Bearer {self.token}"}

    def client(self, **options: Any) -> httpx.Client:
        """An httpx client on this server that sends its token."""
        options.setdefault("timeout", 60)
        return httpx.Client(base_url=self.url, headers=self.headers, **options)

    def sign_in(self, context: BrowserContext) -> None:
        """Sign a browser context in through the login form, as a user does."""
        signed = context.request.post(self.url + "/login", form={"token": self.token})
        assert signed.ok, signed.status

    def start(self) -> ServedOpenCrab:
        exe = str(Path(sys.executable).parent / "opencrab")
        if not self.worker:
            self.token = create_token(self.data_dir, self.env, f"tests-{self.port}")
        self._log = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed in stop
        command = ["worker"] if self.worker else ["up", "--port", str(self.port)]
        self._process = subprocess.Popen(
            [exe, *command, "--data-dir", str(self.data_dir), *self.args],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + START_SECS
        while True:
            if self.worker and "worker: heartbeats by lease" in self.output():
                return self
            try:
                if (
                    not self.worker
                    and httpx.get(self.url + "/api/health", timeout=2).status_code == 200
                ):
                    return self
            except httpx.TransportError:
                pass
            if self._process.poll() is not None or time.monotonic() > deadline:
                output = self.output()
                self.stop()
                raise RuntimeError(f"opencrab {command[0]} did not start:\n{output}")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        """The server process's id."""
        assert self._process is not None, "not started"
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has ended (None while it runs)."""
        assert self._process is not None, "not started"
        return self._process.poll()

    def kill(self) -> None:
        """End the server the hard way (SIGKILL: no shutdown code runs, as in a crash)."""
        assert self._process is not None, "not started"
        self._process.kill()
        self._process.wait()

    def output(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ServedOpenCrab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
