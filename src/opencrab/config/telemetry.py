"""`[telemetry]`: OpenTelemetry export of traces and metrics (opencrab.telemetry). Off by default.

Nothing leaves the process unless an OTLP endpoint is named: `endpoint` here, or the
standard variables `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (as the OpenTelemetry specification expects, setting
one of them alone turns the export on). `enabled = false` or `OTEL_SDK_DISABLED=true` keeps
it off whatever the variables say. OpenCrab sends no other telemetry, ever.

`endpoint` is the collector's base URL (`http://127.0.0.1:4318`): spans go to
`{endpoint}/v1/traces` and metrics to `{endpoint}/v1/metrics`, OTLP over HTTP with
protobuf bodies. gRPC is not built in (it would bring grpcio); every collector that takes
OTLP (Jaeger, Phoenix, Langfuse, the OpenTelemetry Collector) also takes it over HTTP.
`headers` are sent with every export (a collector's API key: `Authorization = "Basic …"`),
besides those of `OTEL_EXPORTER_OTLP_HEADERS` (a key in both: this one). Message text
(prompts, replies, tool arguments and results) is exported only with
`capture_content = true`.

Example:
    [telemetry]
    endpoint = "http://127.0.0.1:4318"
    capture_content = false
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

PROTOCOLS = ("http/protobuf",)
"""The OTLP protocols OpenCrab exports with (`grpc` is named in the error for it)."""


def check_endpoint(url: str, where: str) -> str:
    """`url` as an OTLP/HTTP endpoint: http(s) with a host (ValueError naming `where`)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{where} {url!r} is not an http:// or https:// URL with a host "
            "(e.g. http://127.0.0.1:4318, the OTLP/HTTP port of Jaeger or a collector)"
        )
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number in range
    except ValueError:
        raise ValueError(f"{where} {url!r} has an invalid port") from None
    return url.strip().rstrip("/")


def check_protocol(protocol: str, where: str) -> str:
    """`protocol` when OpenCrab exports with it (ValueError naming `where` otherwise)."""
    value = protocol.strip().lower()
    if value in PROTOCOLS:
        return value
    if value == "grpc":
        raise ValueError(
            f"{where} 'grpc' is not built in: use 'http/protobuf' and the collector's "
            "OTLP/HTTP port (4318 by default)"
        )
    raise ValueError(f"{where} {protocol!r} is unknown; use 'http/protobuf'")


class TelemetrySection(BaseModel):
    """`[telemetry]`: where traces and metrics go (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # None: on when an endpoint is named here or in OTEL_EXPORTER_OTLP_*; false: always off
    enabled: bool | None = None
    endpoint: str = ""  # the collector's base URL; /v1/traces and /v1/metrics are added
    protocol: str = "http/protobuf"  # OTLP over HTTP with protobuf bodies
    headers: dict[str, str] = Field(default_factory=dict)
    service_name: str = Field(default="opencrab", min_length=1, max_length=200)
    capture_content: bool = False  # prompts, replies, tool arguments and results
    metric_interval_secs: float = Field(default=60.0, ge=1.0, le=86_400.0)
    export_timeout_secs: float = Field(default=10.0, gt=0, le=300.0)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return check_endpoint(value, "endpoint") if value.strip() else ""

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: str) -> str:
        return check_protocol(value, "protocol")
