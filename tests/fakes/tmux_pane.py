"""A private tmux server for tests (`tmux -L <unique>`): start a command in a pane,
read the screen, send keys, see the pane's exit status; killed at the end.

Minimal on purpose: agent mode's own tmux module replaces it in the tests once it lands.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

TMUX = shutil.which("tmux") or "tmux"
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


class PrivateTmux:
    """One tmux server on its own socket, with no config file read."""

    def __init__(self) -> None:
        self.socket = f"opencrab-test-{uuid.uuid4().hex[:12]}"
        self.env = {k: os.environ[k] for k in BASE_ENV if k in os.environ}
        self.env.setdefault("LANG", "C.UTF-8")

    def run(self, *args: str) -> str:
        """Run one tmux command on this server; its stdout."""
        done = subprocess.run(
            [TMUX, "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, name: str = "agent"
    ) -> str:
        """Start `argv` (executed directly, no shell) in a new pane; its pane id."""
        flags = [f"-e{key}={value}" for key, value in env.items()]
        return self.run(
            "start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
            "new-session", "-d", "-P", "-F", "#{pane_id}", "-s", name, "-x", "200", "-y", "50",
            "-c", str(cwd), *flags, "--", *argv,
        ).strip()  # fmt: skip

    def capture(self, pane: str) -> str:
        """The pane's visible text."""
        return self.run("capture-pane", "-p", "-J", "-t", pane)

    def send_keys(self, pane: str, *keys: str) -> None:
        """Send tmux key names (e.g. "Enter") to the pane."""
        self.run("send-keys", "-t", pane, *keys)

    def field(self, pane: str, name: str) -> str:
        """One pane format field, e.g. pane_pid, pane_dead, pane_dead_status."""
        return self.run("display-message", "-p", "-t", pane, f"#{{{name}}}").strip()

    def dead_status(self, pane: str) -> int | None:
        """The exit status of the pane's command, or None while it runs."""
        if self.field(pane, "pane_dead") != "1":
            return None
        return int(self.field(pane, "pane_dead_status") or "0")

    def kill(self) -> None:
        """End the server and every pane on it."""
        subprocess.run(
            [TMUX, "-L", self.socket, "kill-server"], capture_output=True, env=self.env, check=False
        )
