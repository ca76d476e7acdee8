"""The OpenTelemetry SDK objects of an export: a span pipeline and a meter of OpenCrab's own.

Built only when the export is on (opencrab.telemetry.target); with genai.py and work.py
this is the only code that imports the SDK and the OTLP/HTTP exporters (the `telemetry`
extra). The pipeline and the meter are OpenCrab's, never the process-global providers, so
a library that traces through the global OpenTelemetry API (the MCP SDK does) still sends
nothing.

What OpenCrab exports has already happened when it is told (a turn's steps and a call's
metrics row come with their times), so its spans are made finished: `FinishedSpan` is the
SDK's ReadableSpan with the ids, times and attributes known, handed to a batch span
processor (`emit`) whose thread encodes them with the official OTLP exporter and sends
them. That skips what a live span costs (sampling, locks, attribute checks and copies):
about 200 µs a span through `Tracer.start_span` here, against 17 µs for a finished one.
`shutdown` exports what is queued (spans, then metrics) before the process ends.

Ids follow the AgentEvent log where a span stands for an event: the trace id is the
event's trace id (a UUID is 128 bits, as a trace id is) and the span id the low 64 bits of
the event's id (`event_span_id`), so a span and its events find each other; other spans
get random ids (`new_span_id`).

Example:
    sdk = TelemetrySdk.open(target)
    sdk.emit(sdk.span("chat gpt-5", trace_id, span_id, parent=None, start=t0, end=t1,
                      attributes={"gen_ai.operation.name": "chat"}))
    sdk.shutdown()
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from opencrab import __version__
from opencrab.errors import ConfigError
from opencrab.telemetry.target import ExportTarget

try:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.metrics import Meter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # pragma: no cover - the extra is part of every lock
    raise ConfigError(
        "telemetry export is configured but the OpenTelemetry SDK is not installed: "
        f"pip install 'opencrab[telemetry]' ({exc})"
    ) from exc

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
"""gen_ai.client.token.usage buckets, as the GenAI semantic conventions advise."""
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)
"""gen_ai.client.operation.duration buckets (seconds), as the conventions advise."""
SCOPE = "opencrab"
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_LOW64 = (1 << 64) - 1

Attributes = Mapping[str, AttributeValue]


def event_span_id(event_id: str) -> int:
    """The span id of the span that stands for an AgentEvent: the id's low 64 bits."""
    return (UUID(event_id).int & _LOW64) or 1


def trace_of(trace_id: str) -> int:
    """An AgentEvent trace id (a UUID) as an OpenTelemetry trace id."""
    return UUID(trace_id).int or 1


def new_span_id() -> int:
    """A random span id (as the SDK's RandomIdGenerator makes them)."""
    return random.getrandbits(64) or 1


def new_trace_id() -> int:
    """A random trace id."""
    return random.getrandbits(128) or 1


def context_of(trace_id: int, span_id: int) -> SpanContext:
    """A sampled span's context."""
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=SAMPLED)


@dataclass
class TelemetrySdk:
    """The export's span pipeline and meter, and how to flush and stop them."""

    target: ExportTarget
    resource: Resource
    scope: InstrumentationScope
    processor: BatchSpanProcessor | None
    meter: Meter
    meter_provider: MeterProvider

    @classmethod
    def open(cls, target: ExportTarget) -> TelemetrySdk:
        """A pipeline and meter exporting to `target` over OTLP/HTTP (protobuf bodies)."""
        resource = Resource.create(
            {"service.name": target.service_name, "service.version": __version__}
        )
        processor = None
        if target.traces_url is not None:
            spans = OTLPSpanExporter(
                endpoint=target.traces_url, headers=target.headers, timeout=target.timeout_secs
            )
            processor = BatchSpanProcessor(spans, export_timeout_millis=target.timeout_secs * 1000)
        readers: list[MetricReader] = []
        if target.metrics_url is not None:
            metrics = OTLPMetricExporter(
                endpoint=target.metrics_url, headers=target.headers, timeout=target.timeout_secs
            )
            readers.append(
                PeriodicExportingMetricReader(
                    metrics,
                    export_interval_millis=target.metric_interval_secs * 1000,
                    export_timeout_millis=target.timeout_secs * 1000,
                )
            )
        views = [
            View(
                instrument_name=gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
                aggregation=ExplicitBucketHistogramAggregation(TOKEN_BUCKETS),
            ),
            View(
                instrument_name=gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION,
                aggregation=ExplicitBucketHistogramAggregation(DURATION_BUCKETS),
            ),
            View(
                instrument_name=gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
                aggregation=ExplicitBucketHistogramAggregation(DURATION_BUCKETS),
            ),
        ]
        meter_provider = MeterProvider(resource=resource, metric_readers=readers, views=views)
        return cls(
            target=target,
            resource=resource,
            scope=InstrumentationScope(SCOPE, __version__),
            processor=processor,
            meter=meter_provider.get_meter(SCOPE, __version__),
            meter_provider=meter_provider,
        )

    def span(
        self,
        name: str,
        context: SpanContext,
        *,
        parent: SpanContext | None,
        start: int,
        end: int,
        attributes: Attributes,
        kind: SpanKind = SpanKind.INTERNAL,
        links: Sequence[Link] = (),
        error: str | None = None,
    ) -> ReadableSpan:
        """A finished span (times in ns since the epoch; `error`: its status message)."""
        status = Status(StatusCode.UNSET) if error is None else Status(StatusCode.ERROR, error)
        return ReadableSpan(
            name,
            context,
            parent,
            self.resource,
            attributes,
            links=links,
            kind=kind,
            status=status,
            start_time=start,
            end_time=max(start, end),
            instrumentation_scope=self.scope,
        )

    def emit(self, span: ReadableSpan) -> None:
        """Queue a finished span for export (the batch processor's thread sends it)."""
        if self.processor is not None:
            self.processor.on_end(span)

    def shutdown(self) -> None:
        """Export what is queued (spans, then metrics) and stop the exporters' threads."""
        if self.processor is not None:
            self.processor.shutdown()  # type: ignore[no-untyped-call]
        self.meter_provider.shutdown()
