"""`opencrab mcp`: OpenCrab as an MCP server over standard input and output.

An MCP client (Claude Code, Codex, an IDE) starts it as a subprocess and speaks
JSON-RPC on its stdin and stdout (opencrab.mcp.server has the tools and resources);
everything else the process says (notices, logs) goes to stderr only.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import typer

from opencrab.cli.common import ConfigOption, DataDirOption, exits_on_error, with_runtime
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when the command runs, not for `--help`
    from opencrab.core.runtime import Runtime


@exits_on_error
def mcp(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Serve OpenCrab's agents, memory, tickets and approvals to an MCP client over stdio.

    The caller is "local" and may do everything the CLI may (the HTTP server's `/mcp`
    checks API tokens instead).

    Example: claude mcp add opencrab -- opencrab mcp --data-dir ./data
    """
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # stdout is the protocol's
    with_runtime(config, data_dir, serve_stdio)


async def serve_stdio(runtime: Runtime) -> None:
    """Serve the MCP server on this process's stdin and stdout until the client closes."""
    from mcp.server.stdio import stdio_server

    from opencrab.mcp.server import mcp_server
    from opencrab.mcp.tools import Caller

    server = mcp_server(runtime, lambda ctx: Caller("local"))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
