"""The OpenTelemetry SDK objects of an export: a tracer and a meter of OpenCrab's own.

Built only when the export is on (opencrab.telemetry.target); this is the one module that
imports the SDK and the OTLP/HTTP exporters (the `telemetry` extra). The providers are
OpenCrab's, never the process-global ones, so a library that traces through the global
OpenTelemetry API (the MCP SDK does) still sends nothing. Spans go through a batch span
processor: a turn only queues them, a background thread exports them, and `shutdown`
exports what is queued (and the metrics) before the process ends.

Span ids follow the AgentEvent log where a span stands for an event (`EventIds`): the
trace id is the event's trace id (a UUID is 128 bits, as a trace id is) and the span id
the low 64 bits of the event's id, so a span and its events find each other.

Example:
    sdk = TelemetrySdk.open(target)
    with sdk.ids.chosen(trace_id, span_id):
        span = sdk.tracer.start_span("invoke_agent crab", context=Context())
    sdk.shutdown()
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opencrab import __version__
from opencrab.errors import ConfigError
from opencrab.telemetry.target import ExportTarget

try:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.metrics import Meter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
    from opentelemetry.trace import Tracer
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


class EventIds(IdGenerator):
    """Random ids, except for the span started inside `chosen` (per thread)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._next = threading.local()

    @contextmanager
    def chosen(self, trace_id: int | None, span_id: int | None) -> Iterator[None]:
        """The next span started in this thread gets these ids (None: a random one; the
        trace id is used only for a span without a parent)."""
        self._next.trace, self._next.span = trace_id, span_id
        try:
            yield
        finally:
            self._next.trace = self._next.span = None

    def generate_trace_id(self) -> int:
        chosen = getattr(self._next, "trace", None)
        self._next.trace = None
        return chosen or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        chosen = getattr(self._next, "span", None)
        self._next.span = None
        return chosen or self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return False  # event trace ids are UUIDs: version bits are not random


@dataclass
class TelemetrySdk:
    """The export's tracer and meter, and how to flush and stop them."""

    target: ExportTarget
    ids: EventIds
    tracer: Tracer
    meter: Meter
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    @classmethod
    def open(cls, target: ExportTarget) -> TelemetrySdk:
        """Providers exporting to `target` over OTLP/HTTP (protobuf bodies)."""
        resource = Resource.create(
            {"service.name": target.service_name, "service.version": __version__}
        )
        ids = EventIds()
        tracer_provider = TracerProvider(resource=resource, id_generator=ids)
        if target.traces_url is not None:
            spans = OTLPSpanExporter(
                endpoint=target.traces_url, headers=target.headers, timeout=target.timeout_secs
            )
            tracer_provider.add_span_processor(
                BatchSpanProcessor(spans, export_timeout_millis=target.timeout_secs * 1000)
            )
        readers = []
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
            ids=ids,
            tracer=tracer_provider.get_tracer(SCOPE, __version__),
            meter=meter_provider.get_meter(SCOPE, __version__),
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )

    def shutdown(self) -> None:
        """Export what is queued (spans, then metrics) and stop the exporters' threads."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
