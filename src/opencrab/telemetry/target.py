"""Where telemetry goes: `[telemetry]` and the standard `OTEL_*` variables, resolved.

The rules (opencrab.config.telemetry says them to the user):
- off when `[telemetry] enabled = false` or `OTEL_SDK_DISABLED=true`;
- else on when an endpoint is named: `[telemetry] endpoint` (the collector's base URL),
  else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (full
  URLs, used as they are), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL: `/v1/traces`
  and `/v1/metrics` are added), as the OpenTelemetry specification has it;
- `[telemetry] enabled = true` with no endpoint anywhere is an error, not a silent no-op;
- the protocol is `[telemetry] protocol`, else `OTEL_EXPORTER_OTLP_PROTOCOL`; only
  `http/protobuf` is built in.
A value that cannot be used raises ConfigError naming the key or variable.

Example:
    target = export_target(settings.telemetry, os.environ)
    target.traces_url if target else "nothing leaves the process"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from opencrab.config.telemetry import TelemetrySection, check_endpoint, check_protocol
from opencrab.errors import ConfigError

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
PROTOCOL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
)
DISABLED = "OTEL_SDK_DISABLED"


@dataclass(frozen=True)
class ExportTarget:
    """Where spans and metrics are sent; a URL left None: that signal is not sent."""

    traces_url: str | None
    metrics_url: str | None
    # [telemetry] headers (None: none); the exporter adds OTEL_EXPORTER_OTLP_HEADERS' own
    headers: dict[str, str] | None
    service_name: str
    capture_content: bool
    metric_interval_secs: float
    timeout_secs: float


def export_target(section: TelemetrySection, environ: Mapping[str, str]) -> ExportTarget | None:
    """Where telemetry goes, or None when nothing is exported (see the module docstring)."""
    if section.enabled is False or environ.get(DISABLED, "").strip().lower() == "true":
        return None
    traces, metrics = _urls(section, environ)
    if traces is None and metrics is None:
        if section.enabled:
            raise ConfigError(
                "[telemetry] enabled = true but no OTLP endpoint is named: set "
                f"[telemetry] endpoint or {ENDPOINT} (e.g. http://127.0.0.1:4318)"
            )
        return None
    for name in PROTOCOL_VARIABLES:
        if environ.get(name, "").strip():
            _checked(check_protocol, environ[name], name)
    return ExportTarget(
        traces_url=traces,
        metrics_url=metrics,
        headers=dict(section.headers) or None,
        service_name=environ.get("OTEL_SERVICE_NAME", "").strip() or section.service_name,
        capture_content=section.capture_content,
        metric_interval_secs=section.metric_interval_secs,
        timeout_secs=section.export_timeout_secs,
    )


def _urls(section: TelemetrySection, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The traces and metrics URLs the section, else the variables, name."""
    if section.endpoint:
        return section.endpoint + "/v1/traces", section.endpoint + "/v1/metrics"
    base = _variable(environ, ENDPOINT)
    traces = _variable(environ, TRACES_ENDPOINT)
    metrics = _variable(environ, METRICS_ENDPOINT)
    if traces is None and base is not None:
        traces = base + "/v1/traces"
    if metrics is None and base is not None:
        metrics = base + "/v1/metrics"
    return traces, metrics


def _variable(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return _checked(check_endpoint, value, name) if value else None


def _checked(check: Callable[[str, str], str], value: str, name: str) -> str:
    try:
        return check(value, name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
