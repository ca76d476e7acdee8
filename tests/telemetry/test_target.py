"""Where telemetry goes: `[telemetry]` and the standard OTEL_* variables (issue 36 §3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencrab.config import load_settings
from opencrab.config.telemetry import TelemetrySection
from opencrab.errors import ConfigError
from opencrab.telemetry import export_target


def test_off_by_default() -> None:
    assert export_target(TelemetrySection(), {}) is None
    assert load_settings().telemetry.endpoint == ""


def test_the_endpoint_in_the_config_turns_it_on() -> None:
    target = export_target(TelemetrySection(endpoint="http://127.0.0.1:4318/"), {})
    assert target is not None
    assert target.traces_url == "http://127.0.0.1:4318/v1/traces"
    assert target.metrics_url == "http://127.0.0.1:4318/v1/metrics"
    assert target.headers is None  # the exporter adds OTEL_EXPORTER_OTLP_HEADERS itself
    assert target.capture_content is False


def test_the_standard_variable_alone_turns_it_on() -> None:
    target = export_target(
        TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.local:4318"}
    )
    assert target is not None
    assert target.traces_url == "http://collector.local:4318/v1/traces"
    assert target.metrics_url == "http://collector.local:4318/v1/metrics"


def test_signal_variables_are_used_as_they_are() -> None:
    target = export_target(
        TelemetrySection(),
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://x.example/api/otel/v1/traces"},
    )
    assert target is not None
    assert target.traces_url == "https://x.example/api/otel/v1/traces"
    assert target.metrics_url is None  # no metrics endpoint named: metrics stay home


def test_the_config_beats_the_variables_and_service_name_comes_from_otel() -> None:
    target = export_target(
        TelemetrySection(endpoint="http://127.0.0.1:6006", headers={"a": "b"}),
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318", "OTEL_SERVICE_NAME": "crabs"},
    )
    assert target is not None
    assert target.traces_url == "http://127.0.0.1:6006/v1/traces"
    assert target.headers == {"a": "b"}
    assert target.service_name == "crabs"


@pytest.mark.parametrize(
    ("section", "environ"),
    [
        (TelemetrySection(enabled=False, endpoint="http://127.0.0.1:4318"), {}),
        (TelemetrySection(enabled=False), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}),
        (
            TelemetrySection(endpoint="http://127.0.0.1:4318"),
            {"OTEL_SDK_DISABLED": "true"},
        ),
    ],
    ids=["enabled-false", "enabled-false-beats-variable", "otel-sdk-disabled"],
)
def test_switched_off(section: TelemetrySection, environ: dict[str, str]) -> None:
    assert export_target(section, environ) is None


def test_enabled_without_an_endpoint_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"enabled = true but no OTLP endpoint.*OTEL_EXPORTER"):
        export_target(TelemetrySection(enabled=True), {})


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318", "not an http:// or https:// URL"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://x/v1/traces", "not an http://"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:99999", "invalid port"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "'grpc' is not built in"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", "unknown"),
    ],
)
def test_unusable_variables_are_named(name: str, value: str, problem: str) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", name: value}
    with pytest.raises(ConfigError, match=name) as raised:
        export_target(TelemetrySection(), environ)
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ('endpoint = "localhost:4318"', "telemetry.endpoint"),
        ('endpoint = "http://"', "not an http:// or https:// URL with a host"),
        ('protocol = "grpc"', "'grpc' is not built in: use 'http/protobuf'"),
        ('protocol = "carrier-pigeon"', "'carrier-pigeon' is unknown"),
        ("capture_contents = true", "capture_contents"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, lines: str, problem: str) -> None:
    config = tmp_path / "opencrab.toml"
    config.write_text(f"[telemetry]\n{lines}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    assert problem in str(raised.value)
    assert str(config) in str(raised.value)
