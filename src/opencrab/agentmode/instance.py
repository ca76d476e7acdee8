"""Which OpenCrab instance agent-mode state belongs to: the one whose data directory it is.

Two OpenCrabs on one machine (two data directories) never share sub-agent panes: each
runs its own tmux server, `tmux -L opencrab-<instance>`, where the instance is a short
hash of the data directory's real path (`[agent_mode] tmux_socket` names another socket
when set). The same data directory always gives the same socket, so a restarted
`opencrab up` (or `agent-mode resume`) finds its panes again.

    instance_id(settings)   # "3f9c2a1b7d04"
    tmux_socket(settings)   # "opencrab-3f9c2a1b7d04"
"""

from __future__ import annotations

import hashlib
import os

from opencrab.config import Settings

SOCKET_PREFIX = "opencrab-"


def instance_id(settings: Settings) -> str:
    """A short, stable id of this instance: the hash of its data directory's real path."""
    real = os.path.realpath(os.path.expanduser(settings.data_dir))
    return hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def tmux_socket(settings: Settings) -> str:
    """The tmux socket (`tmux -L`) of this instance's sub-agent panes."""
    return settings.agent_mode.tmux_socket or SOCKET_PREFIX + instance_id(settings)
