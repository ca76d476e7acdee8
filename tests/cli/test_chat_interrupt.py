"""Ctrl-C in the interactive chat, driven through a real terminal (tmux) and the real CLI.

The model is a fake OpenAI server streaming slowly; the first Ctrl-C stops the turn and
keeps what was streamed so far, marked interrupted; the second Ctrl-C leaves.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import opencrab
from opencrab.cli import build_app
from opencrab.config import load_settings
from opencrab.core.sessions import list_sessions, session_messages
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply

CHAT = "/v1/chat/completions"
WORDS = [f"word{i} " for i in range(60)]


def _chunk(content: str | None = None, *, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"role": "assistant", "content": content}
    return {
        "id": "chatcmpl-slow",
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "model": "gpt-5-mini",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


class Terminal:
    """A tmux server of our own (-L) with one pane running a command."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def start(self, command: str) -> None:
        self.tmux(
            "start-server",
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "200",
            "-y",
            "50",
            command,
        )

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t", "-S", "-200")

    def wait_for(self, what: Callable[[], bool], description: str) -> None:
        deadline = time.monotonic() + 60
        while not what():
            if time.monotonic() > deadline:
                raise AssertionError(f"never happened: {description}\n{self.screen()}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal(f"opencrab-test-{uuid.uuid4().hex[:12]}")
    try:
        yield term
    finally:
        term.kill()


def test_ctrl_c_stops_the_turn_keeps_the_partial_reply_and_the_second_leaves(
    fake_llm_server: FakeLlmServer,
    terminal: Terminal,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    created = CliRunner().invoke(build_app(), ["agent", "create", "--name", "eve"])
    assert created.exit_code == 0, created.output
    fake_llm_server.reply(
        CHAT,
        Reply(
            sse=[_chunk(w) for w in WORDS] + [_chunk(finish="stop"), "[DONE]"],
            event_delay=0.5,  # 30 s for the whole reply: the test stops it long before
        ),
    )
    env = {
        "OPENCRAB_HOME": str(data_dir),
        "OPENAI_API_KEY": "sk-test",
        "OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL": fake_llm_server.url + "/v1",
        "OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL": "http://127.0.0.1:9",
        "OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL": "http://127.0.0.1:9",
        "PYTHONPATH": str(Path(opencrab.__file__).resolve().parents[1]),
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    exe = shlex.quote(str(Path(sys.executable).parent / "opencrab"))
    chat = " ".join(
        ["env", "-i", *(shlex.quote(f"{k}={v}") for k, v in env.items()), exe, "chat", "eve"]
    )
    # the shell reports the exit status (tmux does not always reap in time to tell it);
    # its INT trap keeps it alive, and the chat starts with Ctrl-C's default behaviour
    command = shlex.quote(f'trap ":" INT; {chat}; echo "exit status $?"')
    command = f"sh -c {command}"
    terminal.start(command)
    terminal.wait_for(lambda: "chatting with eve" in terminal.screen(), "the chat starts")

    terminal.tmux("send-keys", "-t", "t", "hello there", "Enter")
    terminal.wait_for(lambda: "word2" in terminal.screen(), "the reply streams in")
    terminal.tmux("send-keys", "-t", "t", "C-c")
    terminal.wait_for(lambda: "interrupted" in terminal.screen(), "the turn is interrupted")

    assert "exit status" not in terminal.screen()  # the first Ctrl-C only stopped the turn
    db = Database(load_settings().database_url)
    try:
        (session,) = list_sessions(db, kind="chat")
        said = session_messages(db, str(session.id))
    finally:
        db.close()
    assert [(m.role, m.speaker_name, m.interrupted) for m in said] == [
        ("user", None, False),
        ("assistant", "eve", True),
    ]
    assert said[0].content == "hello there"
    partial = said[1].content
    assert partial.startswith("word0 word1 word2")
    assert partial != "".join(WORDS)  # cut short, not the whole answer

    terminal.tmux("send-keys", "-t", "t", "C-c")
    terminal.wait_for(lambda: "exit status" in terminal.screen(), "the second Ctrl-C leaves")
    assert "exit status 0" in terminal.screen()
