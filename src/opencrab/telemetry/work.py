"""Work beyond a turn as spans: tickets, heartbeats and imports (core/work_spans.py's sink),
and agent-mode tasks (followed through the runner's listeners).

A work span named with an AgentEvent trace id (a ticket's run is in its session's trace)
is in that trace, so the turns it runs hang below it; one without joins the current work's
trace, or starts a new one. An agent-mode task is a span from the moment it is seen
running to its end (`agent_mode.task {name}`), in a trace of its agent-mode session (the
session id's hash when it is not a UUID), with its status and result.

Example:
    sink = WorkSpans(sdk)
    install_sink(sink)
    runner.listeners.append(AgentModeTasks(sink, runner).on_change)
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from uuid import UUID

from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Link, SpanContext

from opencrab.agentmode.model import TaskStatus
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.core.work_spans import Value, WorkSpan, current_work
from opencrab.telemetry.export import TelemetrySdk, context_of, new_span_id, new_trace_id

ENDED = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
KEEP_ENDED = 10_000
"""Ended agent-mode tasks remembered, so a later save of their session exports none again."""


def trace_for(key: str) -> int:
    """A trace id for `key`: the UUID itself, else the first 128 bits of its SHA-256."""
    try:
        return UUID(key).int or 1
    except ValueError:
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:16], "big") or 1


class OtelWorkSpan:
    """A WorkSpan exported as a finished span when it ends."""

    def __init__(
        self,
        sdk: TelemetrySdk,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        links: list[Link],
        attributes: dict[str, Value],
        start: int,
    ) -> None:
        self.sdk = sdk
        self.name = name
        self.context = context
        self.parent = parent
        self.links = links
        self.attributes = attributes
        self.start = start
        self.error: str | None = None
        self._ended = False

    def set(self, key: str, value: Value) -> None:
        self.attributes[key] = value

    def fail(self, error_type: str, message: str = "") -> None:
        self.attributes[ERROR_TYPE] = error_type
        self.error = message or error_type

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        self.sdk.emit(
            self.sdk.span(
                self.name,
                self.context,
                parent=self.parent,
                start=self.start,
                end=time.time_ns(),
                attributes=self.attributes,
                links=self.links,
                error=self.error,
            )
        )


class WorkSpans:
    """The work-span sink of an export (core/work_spans.WorkSink)."""

    def __init__(self, sdk: TelemetrySdk) -> None:
        self.sdk = sdk

    def start_work(
        self, kind: str, name: str, trace_id: str | None, attributes: Mapping[str, Value]
    ) -> WorkSpan:
        return self.start(kind, name, None if trace_id is None else trace_for(trace_id), attributes)

    def start(
        self,
        kind: str,
        name: str,
        trace: int | None,
        attributes: Mapping[str, Value],
        *,
        start_time: int | None = None,
    ) -> OtelWorkSpan:
        """A span `{kind} {name}` in `trace` (None: the current work's, else a new one)."""
        parent, links = None, []
        work = current_work()
        if isinstance(work, OtelWorkSpan):
            if trace is None or work.context.trace_id == trace:
                parent = work.context
                trace = work.context.trace_id
            else:
                links.append(Link(work.context))
        named: dict[str, Value] = {"opencrab.work.kind": kind}
        named.update({f"opencrab.{kind}.{key}": value for key, value in attributes.items()})
        return OtelWorkSpan(
            self.sdk,
            f"{kind} {name}",
            context_of(trace or new_trace_id(), new_span_id()),
            parent,
            links,
            named,
            time.time_ns() if start_time is None else start_time,
        )


class AgentModeTasks:
    """Agent-mode tasks as spans, from the runner's listener calls."""

    def __init__(self, spans: WorkSpans, runner: AgentModeRunner) -> None:
        self.spans = spans
        self.runner = runner
        self.open: dict[tuple[str, str], OtelWorkSpan] = {}
        self.ended: dict[tuple[str, str], None] = {}  # exported already (the newest KEEP)

    def on_change(self, session_id: str, task_id: str | None) -> None:
        """AgentModeRunner listener: open a task's span when it runs, end it when it ends."""
        session = self.runner.current(session_id)
        if session is None:
            return
        tasks = session.tasks if task_id is None else [session.task(task_id)]
        for task in tasks:
            if task is None:
                continue
            key = (session_id, task.id)
            span = self.open.get(key)
            # a task seen ended without having been seen running gets its span only when
            # this call is about it (a save of the whole session tells old ends again)
            fresh = task.status is TaskStatus.RUNNING or (
                task_id is not None and task.status in ENDED and task.started_at is not None
            )
            if span is None and fresh and key not in self.ended:
                start = task.started_at
                span = self.open[key] = self.spans.start(
                    "agent_mode.task",
                    task.name,
                    trace_for(session_id),
                    {"id": task.id, "session_id": session_id},
                    start_time=None if start is None else int(start.timestamp() * 1e9),
                )
            if span is None or task.status not in ENDED:
                continue
            del self.open[key]
            self.ended[key] = None
            if len(self.ended) > KEEP_ENDED:
                del self.ended[next(iter(self.ended))]
            span.set("opencrab.agent_mode.task.status", task.status.value)
            if task.sub_agent is not None:
                span.set("opencrab.agent_mode.task.agent_type", str(task.sub_agent.agent_type))
            result = task.result
            if task.status is not TaskStatus.COMPLETED or (result and not result.success):
                span.fail(task.status.value.lower(), (result.error or "") if result else "")
            span.end()

    def close(self) -> None:
        """End the spans of tasks still running (the process is stopping)."""
        for span in self.open.values():
            span.end()
        self.open.clear()
