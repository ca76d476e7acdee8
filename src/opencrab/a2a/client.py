"""Remote A2A agents as tool sources: each `[a2a.remotes.<name>]` table
(opencrab.config.a2a_remotes) is an A2aRemoteSource (opencrab.a2a.client_source) whose
one tool, `a2a__<name>__ask` (opencrab.a2a.client_tool), sends the remote agent a
message and brings back its reply, or the task it is working on to poll.

Built on the official `a2a-sdk` (the `a2a` extra: `pip install 'opencrab[a2a]'`): its card
resolver, client factory and JSON-RPC and HTTP+JSON transports. Registered through the
same `register_tool_sources` hook a third-party source uses, so every role starts the
remotes first and stops them last (core/tool_sources.py); the SDK is imported only when
a table names a remote, and a table without the SDK installed is a ConfigError saying
what to install.

Example:
    [a2a.remotes.research]
    url = "https://agents.example.org/a2a/research"
    token_env = "RESEARCH_TOKEN"
    # then grant a2a__research__ask to an agent (dashboard, or PUT /api/agents/{id}/tools)
"""

from __future__ import annotations

import importlib.util
from typing import Any

from opencrab.errors import ConfigError
from opencrab.plugins import hookimpl


@hookimpl
def register_tool_sources(register: Any, settings: Any) -> None:
    remotes = settings.a2a.remotes
    if not remotes:
        return
    if importlib.util.find_spec("a2a.client") is None:
        raise ConfigError(
            f"[a2a.remotes] names {', '.join(sorted(remotes))} but the A2A SDK is not "
            "installed; install it with: pip install 'opencrab[a2a]'"
        )
    from opencrab.a2a.client_source import A2aRemoteSource

    for name, config in remotes.items():
        register(A2aRemoteSource(name, config, settings))
