"""MCP servers as tool sources: each `[mcp.servers.<name>]` table (opencrab.config.mcp)
is an McpServerSource whose tools reach the model as `mcp__<name>__<tool>`.

Registered through the same `register_tool_sources` hook a third-party source uses, so
every role starts them first and stops them last (core/tool_sources.py).
"""

from __future__ import annotations

from typing import Any

from opencrab.mcp.client.source import McpServerSource
from opencrab.plugins import hookimpl

__all__ = ["McpServerSource"]


@hookimpl
def register_tool_sources(register: Any, settings: Any) -> None:
    for name, config in settings.mcp.servers.items():
        register(McpServerSource(name, config, settings))
