"""Heartbeats appear as spans of their own (issue 36 §3): a heartbeat that speaks in its
agent's home session is a `heartbeat speak` span in that session's trace with the turn's
`invoke_agent` below it, and one that reflects is a `heartbeat learn` span with the
reflection's `chat` below it. Real heartbeat ticks through the turn service, the model a
script, exported to a real OTLP/HTTP receiver on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from uuid import UUID

import pytest

from opencrab.config import Settings
from opencrab.config.telemetry import TelemetrySection
from opencrab.core.agent import AgentCreate
from opencrab.core.heartbeat import heartbeat_scheduler, pulse_for
from opencrab.core.runtime import Runtime
from opencrab.store import Database
from opencrab.telemetry import Telemetry, start_telemetry
from tests.core.conftest import homed, speak
from tests.fakes.otlp_receiver import OtlpReceiver, attributes
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import scripted_runtime


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai", "unscripted reply")


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


@pytest.fixture
async def runtime(
    settings: Settings, db: Database, scripted: ScriptedProvider, receiver: OtlpReceiver
) -> AsyncIterator[Runtime]:
    settings.telemetry = TelemetrySection(endpoint=receiver.url, metric_interval_secs=3600)
    async with scripted_runtime(settings, db, scripted) as rt:
        yield rt


@pytest.fixture
async def telemetry(runtime: Runtime) -> AsyncIterator[Telemetry]:
    started = start_telemetry(runtime, environ={})
    assert started is not None
    try:
        yield started
    finally:
        await started.stop()


def exported(telemetry: Telemetry, receiver: OtlpReceiver) -> dict[str, list[Any]]:
    """The spans built from what was queued and sent now, by name."""
    telemetry.spans.flush()
    assert telemetry.sdk.processor is not None
    assert telemetry.sdk.processor.force_flush()
    found: dict[str, list[Any]] = {}
    for span in receiver.spans():
        found.setdefault(span.name, []).append(span)
    return found


async def test_a_heartbeat_speaking_at_home_is_a_span_above_its_turn(
    runtime: Runtime, scripted: ScriptedProvider, telemetry: Telemetry, receiver: OtlpReceiver
) -> None:
    agent, session_id, scheduler = homed(runtime, "homey")
    scripted.outcomes.clear()
    scripted.then(speak("Good morning."))

    tick = await scheduler.tick_now(agent.id)
    assert (tick.decision, tick.result["spoke"]) == ("speak", "Good morning.")
    named = exported(telemetry, receiver)
    (beat,) = named["heartbeat speak"]
    assert beat.trace_id == UUID(session_id).bytes  # the trace of the session it speaks in
    assert beat.parent_span_id == b""
    beat_attrs = attributes(beat.attributes)
    assert beat_attrs["opencrab.work.kind"] == "heartbeat"
    assert beat_attrs["opencrab.heartbeat.agent_id"] == agent.id
    assert beat_attrs["opencrab.heartbeat.decision"] == "speak"
    (turn,) = named["invoke_agent homey"]
    assert turn.trace_id == beat.trace_id
    assert turn.parent_span_id == beat.span_id  # the heartbeat's turn hangs below it
    assert beat.start_time_unix_nano <= turn.start_time_unix_nano
    assert turn.end_time_unix_nano <= beat.end_time_unix_nano


async def test_a_heartbeat_reflecting_is_a_span_above_its_model_call(
    runtime: Runtime, scripted: ScriptedProvider, telemetry: Telemetry, receiver: OtlpReceiver
) -> None:
    agent = runtime.agents.create(AgentCreate(name="thinker"))
    scripted.outcomes.clear()
    scripted.then(
        speak("Noted."),
        '{"skill_name": "repeat-back", "description": "confirm", '
        '"situation_pattern": "a request", "guidance": "repeat the request back"}',
    )
    await runtime.chat(agent, "Take a note.")
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))

    tick = await scheduler.tick_now(agent.id)
    assert (tick.decision, tick.result["success"]) == ("learn", True)
    named = exported(telemetry, receiver)
    (beat,) = named["heartbeat learn"]
    assert attributes(beat.attributes)["opencrab.heartbeat.decision"] == "learn"
    (turn,) = named["invoke_agent thinker"]  # the chat before: not below the heartbeat
    assert turn.trace_id != beat.trace_id
    reflections = [
        s
        for name, found in named.items()
        if name.startswith("chat ")
        for s in found
        if s.parent_span_id == beat.span_id
    ]
    assert len(reflections) == 1  # the reflection's model call hangs below the heartbeat
    (reflection,) = reflections
    assert reflection.trace_id == beat.trace_id
    assert attributes(reflection.attributes)["gen_ai.agent.id"] == agent.id
