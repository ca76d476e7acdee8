"""Spans of work beyond a turn (a ticket's run, a heartbeat's action, an import) for the
telemetry export (opencrab.telemetry).

`work_span(kind, name, ...)` marks where one piece of work begins and ends. Nothing is
made unless the process exports telemetry: opencrab.telemetry installs a `WorkSink` when
`[telemetry]` or the `OTEL_EXPORTER_OTLP_*` variables name an endpoint, and otherwise a
work span costs one global read. While the body runs its span is the current work
(`current_work`): a turn run inside it (a ticket's, a heartbeat's) hangs below it when
both share a trace id, and is linked to it otherwise.

Example:
    with work_span("ticket", ticket.title, trace_id=session_id, ticket_id=ticket.id) as span:
        ...
        span.set("opencrab.ticket.status", "done")
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

Value = str | int | float | bool


class WorkSpan(Protocol):
    """One piece of work's span, open while the work runs."""

    def set(self, key: str, value: Value) -> None:
        """Set an attribute (`opencrab.<kind>.…`)."""
        ...

    def fail(self, error_type: str, message: str = "") -> None:
        """Mark the work failed (`error.type`)."""
        ...

    def end(self) -> None:
        """End the span (once)."""
        ...


class WorkSink(Protocol):
    """Makes the spans (opencrab.telemetry, when the export is on)."""

    def start_work(
        self, kind: str, name: str, trace_id: str | None, attributes: Mapping[str, Value]
    ) -> WorkSpan:
        """Start a span of `kind` (`ticket`, `heartbeat`, `import`, `agent_mode.task`);
        `trace_id` (a UUID) puts it in that AgentEvent trace, else in the current work's
        trace or a new one."""
        ...


class _NoSpan:
    """The span of work when nothing is exported."""

    def set(self, key: str, value: Value) -> None:
        return None

    def fail(self, error_type: str, message: str = "") -> None:
        return None

    def end(self) -> None:
        return None


NO_SPAN = _NoSpan()
_sink: WorkSink | None = None
_current: ContextVar[WorkSpan | None] = ContextVar("opencrab_work_span", default=None)


def install_sink(sink: WorkSink | None) -> None:
    """Export work spans to `sink` from now on (None: stop)."""
    global _sink
    _sink = sink


def sink() -> WorkSink | None:
    """The installed sink (None while nothing is exported)."""
    return _sink


def current_work() -> WorkSpan | None:
    """The span of the work running in this context (None: none, or nothing exported)."""
    return _current.get()


@contextmanager
def work_span(
    kind: str, name: str, *, trace_id: str | None = None, **attributes: Value
) -> Iterator[WorkSpan]:
    """A span around the body (see the module docstring); an exception leaving the body
    marks it failed with the exception's class name."""
    target = _sink
    if target is None:
        yield NO_SPAN
        return
    span = target.start_work(kind, name, trace_id, attributes)
    token = _current.set(span)
    try:
        yield span
    except BaseException as exc:
        span.fail(type(exc).__name__, str(exc))
        raise
    finally:
        _current.reset(token)
        span.end()
