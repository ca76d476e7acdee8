"""The GenAI spans of one turn follow one another in time (issue 36 §3): a model call's
latency is whole milliseconds, so `end - latency` can fall before the step it follows."""

from __future__ import annotations

import time

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opencrab.llm.metrics import CallRecord
from opencrab.llm.router import CallInfo
from opencrab.llm.types import ChatRequest
from opencrab.telemetry.export import TelemetrySdk, context_of, new_span_id, new_trace_id
from opencrab.telemetry.genai import GenAiSpans, _OpenTurn
from opencrab.telemetry.target import ExportTarget


def test_a_call_in_a_turn_never_starts_before_the_step_it_follows() -> None:
    sdk = TelemetrySdk.open(ExportTarget(None, None, None, "opencrab-test", False, 60.0, 1.0))
    exporter = InMemorySpanExporter()
    sdk.processor = SimpleSpanProcessor(exporter)  # type: ignore[assignment]
    spans = GenAiSpans(sdk)
    try:
        trace = new_trace_id()
        now = time.time_ns()
        tool_ended = now - 400_000  # the tool before the call ended 0.4 ms ago
        spans.turns["s1"] = _OpenTurn(
            "invoke_agent aki",
            context_of(trace, new_span_id()),
            None,
            [],
            now - 10**9,
            {},
            tool_ended,
        )
        # a call that took 0.6 ms, rounded up to 1 ms by the router
        record = CallRecord(
            id="m1",
            provider="openai",
            model="gpt-5-mini",
            purpose="tool_calling",
            session_id="s1",
            latency_ms=1,
        )
        request = ChatRequest(model="gpt-5-mini", messages=[])
        spans.call_ended(record, CallInfo(session_id="s1"), request, None)
        spans.flush()
    finally:
        spans.close()
        sdk.shutdown()
    [chat] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert chat.start_time is not None
    assert chat.end_time is not None
    assert chat.start_time >= tool_ended
    assert chat.end_time > chat.start_time
