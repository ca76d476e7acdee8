"""One configured MCP server as a tool source (`mcp__<name>`), kept connected.

`start` connects (launching a stdio server, opencrab.mcp.client.launch), initializes the
session, lists the tools and offers them. When the first connection fails or does not
come up within `start_timeout_secs` it raises McpServerRetrying (a StillTrying), naming
the server (and what a stdio server last wrote to stderr), and goes on trying with the
backoff below: a server not up yet when OpenCrab starts offers its tools once it is; a
table this machine cannot run at all (McpLaunchError: no bubblewrap, no token) fails
for good. Then a task keeps the connection: a
`notifications/tools/list_changed` lists the tools again and offers the new list; a line
on a stdio server's stdout that is no JSON-RPC message is logged and skipped; a
connection that ends (a stdio server that crashed or exited, an HTTP server gone, seen at
the next call) withdraws the tools and is made again after a backoff of 1, 2, 4… up to
60 seconds. `state` ("starting", "running", "failed", "stopped"), `last_error` and
`restarts` say where it is (`status()`, for the dashboard's MCP page and its API, where a
failed connection waiting for its next try shows as "restarting"). `stop` ends the
session (a stdio server's process with it) and withdraws the tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any, Literal, TextIO, cast

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from opencrab.actions.base import SEPARATOR, StillTrying, ToolSource
from opencrab.config import Settings
from opencrab.config.mcp import McpServerConfig
from opencrab.errors import OpenCrabError
from opencrab.mcp.client.launch import McpLaunchError, http_client, stdio_parameters
from opencrab.mcp.client.tools import McpTool, checked_schema
from opencrab.offload import run_blocking

log = logging.getLogger(__name__)

State = Literal["starting", "running", "failed", "stopped"]
MAX_BACKOFF_SECS = 60.0
MAX_PAGES = 100  # tools/list pages read before the list is taken as it is
STOP_SECS = 30.0  # the SDK bounds its own shutdown well within this


class McpServerError(OpenCrabError):
    """An MCP server that cannot be reached or would not start."""


class McpServerRetrying(McpServerError, StillTrying):
    """An MCP server whose first connection failed; its source keeps trying."""


class McpServerSource(ToolSource):
    """The tools of the MCP server `[mcp.servers.<server>]` (see the module docstring)."""

    def __init__(self, server: str, config: McpServerConfig, settings: Settings) -> None:
        super().__init__(f"mcp{SEPARATOR}{server}")
        self.server = server
        self.config = config
        self.settings = settings
        self.state: State = "stopped"
        self.last_error: str | None = None
        self.restarts = 0
        self.sandbox: str | None = None  # "bwrap" or "none" for a stdio server once launched
        self.session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None  # what `stop` cancels (see `_end`)
        self._relist = asyncio.Event()
        self._stopping = False
        self._stderr = ""  # the end of it once the connection ended

    @property
    def shown_state(self) -> str:
        """`state`, with "restarting" for a failed connection that is made again after
        its backoff (a failed first start is not tried again: "failed")."""
        alive = self._task is not None and not self._task.done()
        return "restarting" if self.state == "failed" and alive else self.state

    def status(self) -> dict[str, Any]:
        """Where the server is now, for a page or an API: its state, last error, restarts."""
        return {
            "server": self.server,
            "namespace": self.namespace,
            "transport": self.config.transport,
            "state": self.shown_state,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "sandbox": self.sandbox,
            "tools": sorted(a.definition().name for a in self.actions()),
        }

    async def start(self) -> None:
        """Connect and offer the tools; McpServerError when the first connection fails."""
        self._stopping = False
        self._scope = None  # the new task's own, once it runs
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._keep(first), name=f"mcp server {self.server}")
        try:
            await first
        except McpServerRetrying:
            raise  # its task goes on trying; `stop` ends it
        except BaseException:
            await self._end()
            raise

    async def stop(self) -> None:
        """End the connection (and a stdio server's process) and offer nothing."""
        await self._end()
        self.state = "stopped"
        await self.offer([])

    async def _end(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True  # a cancel the SDK's cleanup swallows still ends it
            # an anyio cancel, which the SDK's shielded shutdown of a stdio server
            # (close stdin, wait, kill the tree) lets finish; a native task.cancel()
            # could cut it short and leave its stdout reader waiting on a live process
            if self._scope is not None:
                self._scope.cancel()
            else:
                task.cancel()
            # waited for, not awaited: its end is not ours, and a cancel of the caller
            # still reaches the caller
            await asyncio.wait({task}, timeout=STOP_SECS)
            if not task.done():  # a last resort
                log.error("MCP server %s: not stopped in %g s; cancelling", self.server, STOP_SECS)
                task.cancel()
                await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                log.error("MCP server %s: its task ended with %r", self.server, task.exception())
        self.session = None

    async def _keep(self, first: asyncio.Future[None]) -> None:
        """Connect, serve, and connect again after a backoff whenever the connection ends,
        until `stop` cancels the scope."""
        with anyio.CancelScope() as self._scope:
            await self._connections(first)
        if not first.done():  # stopped before the first connection was made or failed
            first.cancel()

    async def _connections(self, first: asyncio.Future[None]) -> None:
        delay = 1.0
        while True:
            self.state = "starting"
            began = time.monotonic()
            for_good = False  # no try will do better: the table must change
            try:
                error = await self._connect(first)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = _explain(exc)
                for_good = isinstance(_unwrapped(exc), McpLaunchError)
                if "AddressRefused" in error:
                    error += f", or set allow_private = true in [mcp.servers.{self.server}]"
                    for_good = True
            self.session = None
            if self._stopping:
                return
            if self._stderr:
                error += f"; its last words on stderr: {self._stderr}"
                self._stderr = ""
            self.state = "failed"
            self.last_error = error
            if not first.done() and for_good:
                first.set_exception(McpServerError(f"MCP server {self.server!r}: {error}"))
                return
            if not first.done():
                first.set_exception(
                    McpServerRetrying(
                        f"MCP server {self.server!r}: {error}; trying again in {delay:g} s, "
                        f"then with backoff up to {MAX_BACKOFF_SECS:g} s"
                    )
                )
            log.warning("MCP server %s: %s; connecting again in %g s", self.server, error, delay)
            await self.offer([])
            if time.monotonic() - began > MAX_BACKOFF_SECS:
                delay = 1.0
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_SECS)
            self.restarts += 1

    async def _connect(self, first: asyncio.Future[None]) -> str:
        """One connection, from launch to its end; what ended it."""
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            watched = _Watched(read)
            session = await stack.enter_async_context(
                ClientSession(
                    watched,
                    write,
                    message_handler=self._on_message,
                    client_info=types.Implementation(name="opencrab", version="1"),
                )
            )
            try:
                async with asyncio.timeout(self.config.start_timeout_secs):
                    await session.initialize()
                    tools = await self._tools(session)
            except TimeoutError:
                return (
                    f"no answer to initialize and tools/list within "
                    f"{self.config.start_timeout_secs:g} s "
                    f"([mcp.servers.{self.server}] start_timeout_secs)"
                )
            self.session = session
            self.state = "running"
            self.last_error = None
            await self.offer(tools)
            if not first.done():
                first.set_result(None)
            while True:
                ended = asyncio.create_task(watched.ended.wait())
                relist = asyncio.create_task(self._relist.wait())
                try:
                    await asyncio.wait({ended, relist}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ended.cancel()
                    relist.cancel()
                if watched.ended.is_set():
                    return "the connection ended (the server exited or closed it)"
                self._relist.clear()
                try:
                    async with asyncio.timeout(self.config.call_timeout_secs):
                        await self.offer(await self._tools(session))
                except Exception as exc:
                    log.error("MCP server %s: listing its tools again failed: %s", self.server, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.config.transport == "http":
            client = http_client(self.server, self.config, self.settings)
            async with (
                client,
                streamable_http_client(self.config.url, http_client=client) as streams,
            ):
                yield streams[0], streams[1]
            return
        etc = Path(await run_blocking(tempfile.mkdtemp, prefix="opencrab-mcp-etc-"))
        try:
            params, self.sandbox = await run_blocking(
                stdio_parameters, self.settings, self.server, self.config, etc
            )
            with tempfile.TemporaryFile() as errlog:
                try:  # the SDK hands it to the process as its stderr: a file, not text
                    async with stdio_client(params, errlog=cast(TextIO, errlog)) as streams:
                        yield streams[0], streams[1]
                finally:
                    self._stderr = _tail(errlog)
        finally:
            await run_blocking(shutil.rmtree, etc, ignore_errors=True)

    async def _tools(self, session: ClientSession) -> list[McpTool]:
        """Every tool the server lists now whose schema is a JSON Schema; of a name
        listed twice, the first (the second is logged, naming the server)."""
        found: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            found += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        tools: dict[str, McpTool] = {}
        for tool in found:
            if tool.name in tools:
                log.error(
                    "MCP server %s: tool %r is listed twice; the first one is kept",
                    self.server,
                    tool.name,
                )
            elif checked_schema(self.server, tool):
                tools[tool.name] = McpTool(self, tool)
        return list(tools.values())

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s sent something that is no message: %s", self.server, message)


class _Watched:
    """The session's read stream, telling (`ended`) when the server's side has ended."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ended = asyncio.Event()

    def __getattr__(self, name: str) -> Any:  # last_context and the like
        return getattr(self.inner, name)

    async def receive(self) -> Any:
        try:
            return await self.inner.receive()
        except Exception:
            self.ended.set()
            raise

    async def aclose(self) -> None:
        self.ended.set()
        await self.inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.inner.__anext__()
        except (StopAsyncIteration, Exception):
            self.ended.set()
            raise

    async def __aenter__(self) -> _Watched:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        self.ended.set()
        result: bool | None = await self.inner.__aexit__(*exc)
        return result


def _tail(errlog: IO[bytes], limit: int = 500) -> str:
    """The last `limit` bytes a stdio server wrote to stderr, as one line."""
    errlog.seek(0, os.SEEK_END)
    errlog.seek(max(errlog.tell() - limit, 0))
    return " ".join(errlog.read().decode("utf-8", "replace").split())


def _unwrapped(exc: BaseException) -> BaseException:
    """The one exception an SDK exception group (of groups) of one holds."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _explain(exc: BaseException) -> str:
    """An exception (or an SDK exception group) as one line."""
    exc = _unwrapped(exc)
    return f"{type(exc).__name__}: {exc}"
