"""The real Claude Code adds OpenCrab's `/mcp` as a user does (`claude mcp add --transport
http … --header "Authorization: Bearer …"`) and `claude mcp list` reports it connected;
with a wrong token it does not. Claude Code runs with its own temporary HOME, offline
(anything beyond loopback goes to a closed proxy)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

CLAUDE = Path(__file__).resolve().parents[2] / "clis" / "node_modules" / ".bin" / "claude"


@pytest.fixture
def served(data_dir: Path, fake_llm_server: FakeLlmServer) -> Iterator[ServedOpenCrab]:
    with ServedOpenCrab(data_dir, llm=fake_llm_server) as server:
        yield server


def claude(home: Path, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "IS_SANDBOX": "1",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    done = subprocess.run(
        [str(CLAUDE), *args], env=env, cwd=home, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_claude_code_connects_to_opencrab_over_http(served: ServedOpenCrab, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = served.url + "/mcp"
    auth = f"Authorization: Bearer {served.token}"
    claude(home, "mcp", "add", "--transport", "http", "opencrab", url, "--header", auth)
    claude(home, "mcp", "add", "--transport", "http", "stranger", url, "--header", "X-No: 1")
    listed = claude(home, "mcp", "list")
    lines = {line.split(":", 1)[0]: line for line in listed.splitlines() if ": " in line}
    assert "Connected" in lines["opencrab"], listed
    assert "Connected" not in lines["stranger"], listed
