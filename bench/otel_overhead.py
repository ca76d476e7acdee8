"""What the OpenTelemetry export adds to a turn: OpenCrab turns with export on vs off.

The turn is bench/engine_turn.py's (a scripted model calls generate_inner_voice, then
send_speech; four recorded steps, on SQLite), run through the turn service as every
gateway runs it. One runtime, one process: turns alternate between export on (the
telemetry's turn listener and call observer hooked in, spans exported over OTLP/HTTP by
the batch span processor to a real receiver in another process on 127.0.0.1) and export
off (unhooked), so machine noise hits both alike. Prints p50/mean per turn and the p50 of
this process's CPU time per turn (the exporter's thread included) for each, the ratio
on/off and the overhead in percent (target: under 5% of the per-turn time), and how many
spans the receiver decoded after the final flush (5 per exported turn: invoke_agent,
two chat, two execute_tool).

    python bench/otel_overhead.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine_turn import script
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.fakes.scripted_provider import ScriptedProvider

from opencrab.config import load_settings
from opencrab.config.telemetry import TelemetrySection
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.llm.router import LlmRouter
from opencrab.messages import CliSource, IncomingMessage
from opencrab.store.database import Database
from opencrab.telemetry import Telemetry, export_target
from opencrab.telemetry.export import TelemetrySdk

WARM_UP_TURNS = 20
TARGET_OVERHEAD = 0.05
SPANS_PER_TURN = 5


def receive(url: Any, stop: Any, spans: Any) -> None:
    """The receiver's process: serve until `stop`, then tell how many spans came."""
    with OtlpReceiver() as receiver:
        url.put(receiver.url)
        stop.wait()
        spans.put(len(receiver.spans()))


async def turn(runtime: Runtime, provider: ScriptedProvider, cpu: list[float]) -> float:
    agent = runtime.agents.get("bench")
    session = ensure_chat_session(runtime.db, agent.id)
    provider.outcomes.clear()
    provider.then(*script(), "unused")
    message = IncomingMessage.text("Hello!", source=CliSource(session_id=session))
    start, cpu_start = time.perf_counter(), time.process_time()
    result = await runtime.turns.run(agent, message, session_id=session)
    elapsed = time.perf_counter() - start
    cpu.append(time.process_time() - cpu_start)
    assert result.reply == "Hello there!", result
    return elapsed


def hook(runtime: Runtime, telemetry: Telemetry, on: bool) -> None:
    """Hook the export in (as start_telemetry does) or out."""
    listeners, observers = runtime.turns.listeners, runtime.router.observers
    hooked = telemetry.spans.on_step in listeners
    if on and not hooked:
        listeners.append(telemetry.spans.on_step)
        observers.append(telemetry.spans)
    elif hooked and not on:
        listeners.remove(telemetry.spans.on_step)
        observers.remove(telemetry.spans)


async def main(turns: int) -> None:
    context = multiprocessing.get_context("spawn")
    url, stop, received = context.Queue(), context.Event(), context.Queue()
    collector = context.Process(target=receive, args=(url, stop, received), daemon=True)
    collector.start()
    endpoint = url.get(timeout=120)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENCRAB_HOME"] = str(Path(tmp) / "data")
        settings = load_settings()
        db = Database(settings.database_url)
        db.upgrade()
        provider = ScriptedProvider("openai", "unused")
        router = LlmRouter(settings)
        router.register_provider(provider)
        target = export_target(TelemetrySection(endpoint=endpoint), {})
        assert target is not None
        async with Runtime.open(settings, db=db, router=router) as runtime:
            runtime.agents.create(AgentCreate(name="bench"))
            telemetry = Telemetry(runtime, TelemetrySdk.open(target))  # hooked in
            on: list[float] = []
            off: list[float] = []
            on_cpu: list[float] = []
            off_cpu: list[float] = []
            for exporting in (True, False):  # warm up both ways
                hook(runtime, telemetry, exporting)
                for _ in range(WARM_UP_TURNS):
                    await turn(runtime, provider, [])
            for n in range(turns):
                for exporting in (True, False) if n % 2 == 0 else (False, True):
                    hook(runtime, telemetry, exporting)
                    times, cpu = (on, on_cpu) if exporting else (off, off_cpu)
                    times.append(await turn(runtime, provider, cpu))
            hook(runtime, telemetry, True)
            await telemetry.stop()  # flushes every span queued
        db.close()
    stop.set()
    spans = received.get(timeout=120)
    collector.join(timeout=30)

    report("export off", off, off_cpu)
    report("export on", on, on_cpu)
    ratio = statistics.median(on) / statistics.median(off)
    cpu_ratio = statistics.median(on_cpu) / statistics.median(off_cpu)
    exported = turns + WARM_UP_TURNS  # the turns with export on, warm-up included
    print(f"ratio on/off p50 per turn: {ratio:.3f} (overhead {100 * (ratio - 1):+.1f}%)")
    print(
        f"ratio on/off p50 CPU per turn: {cpu_ratio:.3f} (overhead {100 * (cpu_ratio - 1):+.1f}%)"
    )
    print(f"target: overhead < {100 * TARGET_OVERHEAD:.0f}% of the per-turn time")
    print(f"spans received: {spans} (expected {SPANS_PER_TURN * exported})")


def report(name: str, times: list[float], cpu: list[float]) -> None:
    ms = sorted(t * 1000 for t in times)
    p95, cpu_p50 = ms[int(len(ms) * 0.95) - 1], statistics.median(cpu) * 1000
    print(
        f"{name:>10}: p50 {statistics.median(ms):.2f} ms  mean {statistics.fmean(ms):.2f} ms"
        f"  p95 {p95:.2f} ms  CPU p50 {cpu_p50:.2f} ms  ({len(ms)} turns)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    asyncio.run(main(parser.parse_args().turns))
