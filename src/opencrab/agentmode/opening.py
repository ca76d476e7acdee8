"""Opening an agent-mode runner the way OpenCrab's processes do (`opencrab up`, `opencrab
worker`, `opencrab agent-mode start`): over the configured sessions folder, the data
directory's tmux socket, OpenCrab's LLM settings as the sub-agents' credentials and the
locale and proxy of its environment."""

from __future__ import annotations

import os

from opencrab.agentmode import instance
from opencrab.agentmode.credentials import SubAgentCredentials
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.service import AgentModeService
from opencrab.agentmode.tmux import TmuxServer
from opencrab.config import Settings
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper

PASSED_ENV = (
    "LANG",
    "LC_ALL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)
"""Variables of OpenCrab's own environment a sub-agent gets (its HOME is its own): the
locale and the proxy. No provider key or base URL: those come from OpenCrab's LLM
settings (`credentials.py`), so a key in the environment reaches a CLI only the way
OpenCrab's config reads it, approved for the CLI, never as a question."""


def open_runner(
    settings: Settings,
    db: Database,
    *,
    agent_id: str | None = None,
    credentials: SubAgentCredentials | None = None,
    leases: LeaseKeeper | None = None,
) -> AgentModeRunner:
    """A runner over `[agent_mode]` (sessions dir), the data dir and its tmux socket; the
    sub-agents talk to OpenCrab's configured providers (`credentials`, default: read
    from `settings` and the store) and get the locale and proxy of its environment; with
    `leases`, each session is watched under its lease (see the module docstring)."""
    service = AgentModeService.open(settings, db)
    extra = {name: os.environ[name] for name in PASSED_ENV if os.environ.get(name)}
    tmux = TmuxServer(instance.tmux_socket(settings))
    found = credentials if credentials is not None else SubAgentCredentials.open(settings, db)
    return AgentModeRunner(
        service, tmux, agent_id=agent_id, extra_env=extra, credentials=found, leases=leases
    )
