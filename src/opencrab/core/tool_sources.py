"""The process's tool sources: found through the hook, started, mirrored, stopped.

Every process that runs turns (`opencrab up` with HTTP or without, `opencrab worker`, the
CLI's `chat`, `heartbeat tick` and `discuss`) calls `start_tool_sources(runtime)` before
anything else uses the action registry and `await sources.stop()` after everything else
has stopped. Each
source registered through the `register_tool_sources` hook is attached to the runtime's
registry and started in turn; whenever its list changes (opencrab.actions.base.ToolSource) the
registry offers the new list and the `tools` table stores a row for every new tool, so
it can be granted. A tool that vanishes keeps its row and its grants: it is not
callable (and not listed by `/api/tools`) until its source offers it again.

A source that fails to start (or whose namespace clashes with another's) is logged,
named among the runtime's notices and offers nothing; the others run. One whose start
raises StillTrying (an MCP server not reachable yet) is named the same way but keeps
trying in the background, offers its tools once it connects, and is stopped with the
others.

Example:
    sources = await start_tool_sources(runtime)
    try:
        ...  # heartbeats, tickets, gateways, the HTTP app
    finally:
        await sources.stop()
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opencrab.actions.base import ActionRegistry, StillTrying, ToolSource
from opencrab.core.tools import sync_tools
from opencrab.errors import ConfigError
from opencrab.offload import run_blocking
from opencrab.store import Database

if TYPE_CHECKING:
    from opencrab.config import Settings
    from opencrab.core.runtime import Runtime

log = logging.getLogger(__name__)


def registered_tool_sources(settings: Settings) -> list[ToolSource]:
    """Every source the `register_tool_sources` hook registers, in the hook's order."""
    from opencrab.plugins import plugin_manager

    found: list[ToolSource] = []

    def register(source: Any) -> None:
        if not isinstance(source, ToolSource):
            raise ConfigError(
                f"register_tool_sources registered {source!r}, which is not a "
                "ToolSource (opencrab.ext.ToolSource)"
            )
        found.append(source)

    plugin_manager().hook.register_tool_sources(register=register, settings=settings)
    return found


@dataclass
class RunningToolSources:
    """The sources one process attached, and which of them started."""

    registry: ActionRegistry
    db: Database
    attached: list[ToolSource] = field(default_factory=list)
    started: list[ToolSource] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # namespace -> why it offers nothing

    async def mirror(self, source: ToolSource) -> None:
        """Store a `tools` row for every tool the registry offers now (new ones included)."""
        await run_blocking(sync_tools, self.db, self.registry)

    async def add(self, source: ToolSource, notices: list[str]) -> None:
        """Attach and start one more source while the process runs (an MCP server added
        in the dashboard); a failure is recorded in `failed` and `notices` as at start-up."""
        self.failed.pop(source.namespace, None)
        await _start(self, source, notices)

    async def remove(self, source: ToolSource) -> None:
        """Stop one source and take it out of the registry (its tools rows and grants stay)."""
        if source in self.started:
            try:
                await source.stop()
            except Exception:
                log.exception("tool source %s did not stop cleanly", source.namespace)
            self.started.remove(source)
        if source in self.attached:
            source.unsubscribe(self.mirror)
            self.registry.detach(source)
            self.attached.remove(source)
        self.failed.pop(source.namespace, None)

    async def stop(self) -> None:
        """Stop the started sources, the last started first; each leaves the registry."""
        for source in reversed(self.attached):
            if source in self.started:
                try:
                    await source.stop()
                except Exception:
                    log.exception("tool source %s did not stop cleanly", source.namespace)
            source.unsubscribe(self.mirror)
            self.registry.detach(source)
        self.attached.clear()
        self.started.clear()


async def start_tool_sources(runtime: Runtime) -> RunningToolSources:
    """Attach and start every registered tool source (see the module docstring)."""
    running = RunningToolSources(runtime.registry, runtime.db)
    try:
        for source in registered_tool_sources(runtime.settings):
            await _start(running, source, runtime.notices)
    except BaseException:  # cancelled while starting: what started is stopped again
        await running.stop()
        raise
    return running


async def _start(running: RunningToolSources, source: ToolSource, notices: list[str]) -> None:
    try:
        running.registry.attach(source)
    except ValueError as exc:
        log.error("tool source %s left out: %s", source.namespace, exc)
        running.failed[source.namespace] = str(exc)
        notices.append(f"tool source {source.namespace} left out: {exc}")
        return
    running.attached.append(source)
    source.subscribe(running.mirror)
    try:
        await source.start()
    except StillTrying as exc:
        log.warning("tool source %s did not start yet: %s", source.namespace, exc)
        running.failed[source.namespace] = f"{exc}"
        notices.append(f"tool source {source.namespace} did not start yet ({exc})")
        running.started.append(source)  # its tries go on until it is stopped
        return
    except Exception as exc:
        log.exception("tool source %s did not start; its tools are absent", source.namespace)
        reason = f"{type(exc).__name__}: {exc}"
        running.failed[source.namespace] = reason
        notices.append(f"tool source {source.namespace} did not start ({reason})")
        await source.offer([])  # whatever it offered before it failed is withdrawn
        return
    running.started.append(source)
