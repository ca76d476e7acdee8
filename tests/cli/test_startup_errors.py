"""Start-up with a provider that has no key yet, and configuration errors while starting
(issue 32, Major 4), through the real `opencrab up` and `opencrab worker` commands.

A provider the user's settings use without a key does not stop either command: it is
noted and waits for a key. A configuration error found while starting is printed as
its message alone (no traceback, no "Application startup failed") and the command
exits with 2, like every other configuration error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fakes.ports import closed_port, free_port
from tests.fakes.served import START_SECS, as_root, create_token

EXE = str(Path(sys.executable).parent / "opencrab")


def user_env() -> dict[str, str]:
    """The test's environment without provider keys; no local model is looked for."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENCRAB_") and not k.endswith("_API_KEY")
    }
    env["OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    env["OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    env["OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL"] = f"http://127.0.0.1:{closed_port()}/v1"
    return env


def assert_message_alone(done: subprocess.CompletedProcess[str], message: str) -> None:
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "Traceback" not in said, said
    assert "Application startup failed" not in said, said
    assert message in " ".join(done.stderr.split()), said


def test_up_says_a_config_error_found_while_starting_alone_and_exits_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = user_env()
    create_token(data, env, "admin")  # as root up needs one before it starts anything
    config = tmp_path / "opencrab.toml"
    # the token is there, the guild list is not: found when the gateway is built
    config.write_text("[gateway.discord]\nenabled = true\n", encoding="utf-8")
    env["DISCORD_TOKEN"] = "a-bot-token"
    port = free_port()
    env["OPENCRAB_DASHBOARD__PORT"] = str(port)
    command = [EXE, "up", "--port", str(port), "--data-dir", str(data), "--config", str(config)]
    done = subprocess.run(
        as_root(command), env=env, capture_output=True, text=True, timeout=START_SECS
    )
    assert_message_alone(done, "config error: gateway.discord.guild_ids")


def test_a_worker_says_a_config_error_alone_and_exits_2(tmp_path: Path) -> None:
    env = user_env()
    env["OPENCRAB_DATABASE__URL"] = "not a database"
    done = subprocess.run(
        [EXE, "worker", "--data-dir", str(tmp_path / "data")],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_SECS,
    )
    assert_message_alone(done, "config error: database url 'not a database'")


def test_a_worker_starts_while_a_provider_the_config_uses_has_no_key(tmp_path: Path) -> None:
    config = tmp_path / "opencrab.toml"
    config.write_text('[llm]\ndefault_provider = "openai"\n', encoding="utf-8")
    command = [EXE, "worker", "--data-dir", str(tmp_path / "data"), "--config", str(config)]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        worker = subprocess.Popen(
            command, env=user_env(), stdout=log, stderr=subprocess.STDOUT, text=True
        )

        def output() -> str:
            log.flush()
            log.seek(0)
            return " ".join(log.read().split())

        try:
            deadline = time.monotonic() + START_SECS
            while "openai needs an API key" not in output() and worker.poll() is None:
                assert time.monotonic() < deadline, output()
                time.sleep(0.2)
            time.sleep(1)  # still running once the notice is out
            assert worker.poll() is None, output()
            said = output()
            assert "set llm.providers.openai.api_key in your config file" in said
            assert "or export OPENAI_API_KEY" in said
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
        assert worker.returncode in (0, -signal.SIGTERM), output()
        assert "Traceback" not in output()
