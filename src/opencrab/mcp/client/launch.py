"""How an MCP server is reached: a stdio server's command line and environment, an HTTP
server's client.

A stdio server runs as execute_command's commands do (opencrab.actions.sandbox): when
the process is root, as `[tools] command_uid/gid` with no capabilities; with `[tools]
sandbox` "auto" (and bubblewrap installed) or "bwrap", inside bubblewrap: /usr, the
top-level links and a few files of /etc read-only, the table's `read_paths` read-only at
their own paths, a private /tmp, its scratch folder (`<data dir>/mcp/<name>`) writable
as /mcp (its HOME and working folder), no network unless `network = true`. Its
environment is PATH, HOME and LANG plus the table's `env` (the SDK adds the harmless
LOGNAME, SHELL, TERM and USER): no provider key, no OPENCRAB_* variable.

An HTTP server's client sends the table's headers and, with `bearer_token_env`, the
variable's value as a bearer token; unless `allow_private = true` every connection
goes through the SSRF guard (opencrab.actions.net_guard) like http_request's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpcore2
import httpx2
from mcp.client.stdio import StdioServerParameters

from opencrab.actions.net_guard import AddressRefused, allowed_networks, check_address, resolve
from opencrab.actions.sandbox import box_base, command_user, drop_to, setpriv_path, write_etc
from opencrab.config import Settings
from opencrab.config.mcp import McpServerConfig
from opencrab.errors import ConfigError

BOX_HOME = "/mcp"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
TMP_MB = 64


class McpLaunchError(ConfigError):
    """A server this machine cannot start as configured (no bubblewrap, no token…)."""


def scratch_dir(settings: Settings, server: str) -> Path:
    """The one folder a stdio server may write: `<data dir>/mcp/<name>`."""
    return Path(settings.data_dir) / "mcp" / server


def stdio_parameters(
    settings: Settings, server: str, config: McpServerConfig, etc: Path
) -> tuple[StdioServerParameters, str]:
    """The SDK's spawn parameters (blocking: makes folders) and "bwrap" or "none".

    `etc` is a folder the box's passwd and group are written to.
    """
    limits = settings.tools
    user = command_user(limits)
    scratch = scratch_dir(settings, server)
    scratch.mkdir(parents=True, exist_ok=True)
    if user.switched:
        os.chown(scratch, user.uid, user.gid)
    bwrap = shutil.which("bwrap") if limits.sandbox != "none" else None
    if bwrap is None and limits.sandbox == "bwrap":
        raise McpLaunchError(
            f'MCP server {server!r} must run in a sandbox ([tools] sandbox = "bwrap") but '
            "bubblewrap (bwrap) is not installed on this machine"
        )
    if bwrap is None:
        home = str(scratch)
        argv = [*(drop_to(user, setpriv_path()) if user.switched else []), config.command]
        sandbox = "none"
    else:
        write_etc(user, etc)
        home = BOX_HOME
        argv = box_base(bwrap, user, etc, network=config.network)
        argv += ["--size", str(TMP_MB * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp"]  # noqa: S108
        argv += _read_binds(config.read_paths)
        argv += ["--bind", str(scratch), BOX_HOME, "--chdir", BOX_HOME]
        if user.switched:
            argv += drop_to(user, setpriv_path())
        argv.append(config.command)
        sandbox = "bwrap"
    env = {"PATH": SAFE_PATH, "HOME": home, "LANG": "C.UTF-8", **config.env}
    command, *args = argv
    return (
        StdioServerParameters(
            command=command,
            args=[*args, *config.args],
            env=env,
            cwd=str(scratch),
            encoding_error_handler="replace",
        ),
        sandbox,
    )


def _read_binds(paths: Iterable[str]) -> list[str]:
    """Read-only binds of `paths` at their own places, below folders readable by all."""
    argv: list[str] = []
    made: set[str] = set()
    for raw in paths:
        path = Path(raw).expanduser().absolute()
        for parent in reversed(path.parents):
            if str(parent) != "/" and str(parent) not in made:
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        argv += ["--ro-bind", str(path), str(path)]
        made.add(str(path))
    return argv


def http_client(server: str, config: McpServerConfig, settings: Settings) -> httpx2.AsyncClient:
    """The client an HTTP server is reached with (see the module docstring)."""
    headers = dict(config.headers)
    if config.bearer_token_env:
        token = os.environ.get(config.bearer_token_env, "")
        if not token:
            raise McpLaunchError(
                f"[mcp.servers.{server}] bearer_token_env names {config.bearer_token_env}, "
                "which is not set; set it to the server's token"
            )
        headers["Authorization"] = f"Bearer {token}"
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    if not config.allow_private:
        allow = allowed_networks(settings.tools.http_allow_networks)
        # the transport's own pool, rebuilt with the guard as its network backend
        transport._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            network_backend=GuardedBackend(allow),
        )
    timeout = httpx2.Timeout(30.0, read=300.0)
    return httpx2.AsyncClient(
        headers=headers, timeout=timeout, transport=transport, trust_env=False
    )


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend connecting only to addresses the SSRF guard allows."""

    def __init__(self, allow: list[Any]) -> None:
        self.allow = allow
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Resolve `host`, refuse it if any address is refused, connect to a checked one."""
        addresses = await resolve(host, port)
        for ip in addresses:
            check_address(ip, host, self.allow)
        return await self.inner.connect_tcp(
            str(addresses[0]), port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise AddressRefused("an MCP server is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)
