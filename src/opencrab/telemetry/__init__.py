"""OpenTelemetry export: turns, model calls and actions as GenAI spans, and their metrics.

Off by default: nothing leaves the process unless `[telemetry]` or the standard
`OTEL_EXPORTER_OTLP_*` variables name an OTLP endpoint (telemetry/target.py has the rules).
Then a process (`opencrab up`, `opencrab worker`: the `telemetry` row of
opencrab.process's SERVICES, first to start and last to stop) exports

- spans per the GenAI semantic conventions (telemetry/genai.py): `invoke_agent` per turn,
  `chat` per model call, `execute_tool` per action, mirroring the AgentEvent chain;
- spans of tickets, heartbeats, imports and agent-mode tasks (telemetry/work.py);
- the `gen_ai.client.token.usage` and `gen_ai.client.operation.duration` histograms,

over OTLP/HTTP with protobuf bodies, through the official OpenTelemetry SDK and exporters
(telemetry/export.py, the only module that imports them: when the export is off the SDK
is never imported and no exporter exists). It hooks in at two places that already see
everything: the turn service's listeners and the router's call observers. OpenCrab sends
no other telemetry, ever.

Example:
    telemetry = start_telemetry(runtime)   # None: the export is off
    ...
    if telemetry is not None:
        await telemetry.stop()              # exports what is queued
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from opencrab.core.work_spans import install_sink
from opencrab.offload import run_blocking
from opencrab.telemetry.target import ExportTarget, export_target

if TYPE_CHECKING:
    from opencrab.agentmode.runner import AgentModeRunner
    from opencrab.core.runtime import Runtime
    from opencrab.telemetry.export import TelemetrySdk
    from opencrab.telemetry.genai import GenAiSpans
    from opencrab.telemetry.work import AgentModeTasks

__all__ = ["ExportTarget", "Telemetry", "export_target", "start_telemetry"]


class Telemetry:
    """A running export: its SDK objects and the hooks it installed."""

    def __init__(self, runtime: Runtime, sdk: TelemetrySdk) -> None:
        from opencrab.telemetry.genai import GenAiSpans
        from opencrab.telemetry.work import WorkSpans

        self.runtime = runtime
        self.sdk = sdk
        self.spans: GenAiSpans = GenAiSpans(sdk)
        self.work = WorkSpans(sdk)
        self.tasks: list[tuple[AgentModeRunner, AgentModeTasks]] = []
        runtime.turns.listeners.append(self.spans.on_step)
        runtime.router.observers.append(self.spans)
        install_sink(self.work)

    @property
    def target(self) -> ExportTarget:
        return self.sdk.target

    def follow_agent_mode(self, runner: AgentModeRunner) -> None:
        """Export `runner`'s tasks as spans."""
        from opencrab.telemetry.work import AgentModeTasks

        tasks = AgentModeTasks(self.work, runner)
        runner.listeners.append(tasks.on_change)
        self.tasks.append((runner, tasks))

    async def stop(self) -> None:
        """Unhook, end the spans still open, export what is queued and stop the exporters."""
        install_sink(None)
        if self.spans.on_step in self.runtime.turns.listeners:
            self.runtime.turns.listeners.remove(self.spans.on_step)
        if self.spans in self.runtime.router.observers:
            self.runtime.router.observers.remove(self.spans)
        for runner, tasks in self.tasks:
            if tasks.on_change in runner.listeners:
                runner.listeners.remove(tasks.on_change)
            tasks.close()
        self.spans.close()
        await run_blocking(self.sdk.shutdown)


def start_telemetry(runtime: Runtime, environ: Mapping[str, str] | None = None) -> Telemetry | None:
    """Start exporting `runtime`'s turns, calls and work, or None when the export is off
    (no SDK object is made then). ConfigError for a setting or variable that cannot be used."""
    target = export_target(runtime.settings.telemetry, os.environ if environ is None else environ)
    if target is None:
        return None
    from opencrab.telemetry.export import TelemetrySdk

    return Telemetry(runtime, TelemetrySdk.open(target))
