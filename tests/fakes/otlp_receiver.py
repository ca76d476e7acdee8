"""An OTLP/HTTP receiver on loopback, for the telemetry export's tests.

It answers `POST /v1/traces` and `POST /v1/metrics` as a collector does (protobuf bodies,
decoded with the official `opentelemetry-proto` messages) and records every request it
gets, whatever its path, so a test can also prove that nothing came.

    with OtlpReceiver() as receiver:
        ...  # point [telemetry] endpoint at receiver.url
        receiver.spans()          # every span received, as protobuf Span messages
        receiver.metrics()        # every metric received, as protobuf Metric messages
        receiver.requests         # (method, path) of everything that came in
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def value_of(value: AnyValue) -> Any:
    """An attribute's value as Python (arrays as tuples)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value_of(v) for v in value.array_value.values)
    return None if kind is None else getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    """Protobuf KeyValues as a dict."""
    return {pair.key: value_of(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


class OtlpReceiver:
    """A collector's OTLP/HTTP endpoint on a free loopback port (see the module docstring)."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metric_exports: list[ExportMetricsServiceRequest] = []
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(("POST", self.path))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    with receiver._lock:
                        receiver.traces.append(request)
                    self._answer(ExportTraceServiceResponse().SerializeToString())
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    with receiver._lock:
                        receiver.metric_exports.append(metrics)
                    self._answer(ExportMetricsServiceResponse().SerializeToString())
                else:
                    self.send_error(404)

            def do_GET(self) -> None:
                with receiver._lock:
                    receiver.requests.append(("GET", self.path))
                self.send_error(404)

            def _answer(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def spans(self) -> list[Span]:
        """Every span received so far."""
        with self._lock:
            return [
                span
                for request in self.traces
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def resources(self) -> list[dict[str, Any]]:
        """The resource attributes of every export received so far."""
        with self._lock:
            exports = [*self.traces, *self.metric_exports]
        found = []
        for request in exports:
            groups = getattr(request, "resource_spans", None) or request.resource_metrics
            found += [attributes(group.resource.attributes) for group in groups]
        return found

    def metrics(self) -> list[Metric]:
        """Every metric received so far."""
        with self._lock:
            return [
                metric
                for request in self.metric_exports
                for resource in request.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
            ]

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
