"""What the OpenTelemetry export adds to a turn: OpenCrab turns with export on vs off.

The turn is bench/engine_turn.py's (a scripted model calls generate_inner_voice, then
send_speech; four recorded steps, on SQLite), run through the turn service as every
gateway runs it. One runtime, one process: blocks of BLOCK turns alternate between export
on (the telemetry's turn listener and call observer hooked in, spans exported over
OTLP/HTTP to a real receiver in another process on 127.0.0.1) and export off (unhooked),
so machine noise hits both alike. The spans are built and sent off the turn's path, so an
on-block ends by building and sending what its turns queued (the builder's drain and the
batch processor's flush) inside the block's time: every cost of the export is charged to
the turns that caused it.

Prints, for each side: the p50 of the turns' own times (the latency a caller sees) and the
block time per turn (everything, the export's threads included), wall and CPU of this
process; then the ratios on/off with the overhead in percent (target: under 5% of the
per-turn time), and how many spans the receiver decoded (5 per exported turn:
invoke_agent, two chat, two execute_tool). On a busy machine the block figures move by
more than the export costs, so the export's own threads are also timed alone (their
thread CPU time: building the spans and metrics, encoding and sending them) and shown
per exported turn against the off side's CPU per turn.

    python bench/otel_overhead.py [--blocks N]
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
from dataclasses import dataclass, field
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

BLOCK = 25
TARGET_OVERHEAD = 0.05
SPANS_PER_TURN = 5


def receive(url: Any, stop: Any, spans: Any) -> None:
    """The receiver's process: serve until `stop`, then tell how many spans came."""
    with OtlpReceiver() as receiver:
        url.put(receiver.url)
        stop.wait()
        spans.put(len(receiver.spans()))


async def turn(runtime: Runtime, provider: ScriptedProvider) -> float:
    agent = runtime.agents.get("bench")
    session = ensure_chat_session(runtime.db, agent.id)
    provider.outcomes.clear()
    provider.then(*script(), "unused")
    message = IncomingMessage.text("Hello!", source=CliSource(session_id=session))
    start = time.perf_counter()
    result = await runtime.turns.run(agent, message, session_id=session)
    elapsed = time.perf_counter() - start
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


class ThreadCpu:
    """The CPU time the export's own threads spend (time.thread_time around their work)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.build = 0.0
        self.send = 0.0
        spans = telemetry.spans
        drain = spans._drain  # the builder thread's (and flush's) work
        assert telemetry.sdk.processor is not None
        batch = telemetry.sdk.processor._batch_processor  # the SDK's worker
        export = batch._exporter.export

        def timed_drain() -> None:
            start = time.thread_time()
            drain()
            self.build += time.thread_time() - start

        def timed_export(batch_spans: Any) -> Any:
            start = time.thread_time()
            try:
                return export(batch_spans)
            finally:
                self.send += time.thread_time() - start

        spans._drain = timed_drain  # type: ignore[method-assign]
        batch._exporter.export = timed_export  # type: ignore[method-assign]


@dataclass
class Side:
    """One side's turns: their own times, and their blocks' wall and CPU time."""

    turns: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0

    async def block(
        self, runtime: Runtime, provider: ScriptedProvider, telemetry: Telemetry | None
    ) -> None:
        """BLOCK turns, then (export on) building and sending what they queued."""
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(BLOCK):
            self.turns.append(await turn(runtime, provider))
        if telemetry is not None:
            telemetry.spans.flush()
            assert telemetry.sdk.processor is not None
            telemetry.sdk.processor.force_flush()
        self.wall += time.perf_counter() - start
        self.cpu += time.process_time() - cpu_start


async def main(blocks: int) -> None:
    context = multiprocessing.get_context("spawn")
    url, stop, received = context.Queue(), context.Event(), context.Queue()
    collector = context.Process(target=receive, args=(url, stop, received), daemon=True)
    collector.start()
    endpoint = url.get(timeout=120)
    on, off = Side(), Side()
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
            for exporting in (True, False):  # warm up both ways
                hook(runtime, telemetry, exporting)
                await Side().block(runtime, provider, telemetry if exporting else None)
            threads = ThreadCpu(telemetry)
            for n in range(blocks):
                for exporting in (True, False) if n % 2 == 0 else (False, True):
                    hook(runtime, telemetry, exporting)
                    side = on if exporting else off
                    await side.block(runtime, provider, telemetry if exporting else None)
            hook(runtime, telemetry, True)
            await telemetry.stop()
        db.close()
    stop.set()
    spans = received.get(timeout=120)
    collector.join(timeout=30)

    count = blocks * BLOCK
    for name, side in (("export off", off), ("export on", on)):
        print(
            f"{name:>10}: turn p50 {statistics.median(side.turns) * 1000:.2f} ms"
            f"  block time per turn {side.wall / count * 1000:.2f} ms"
            f"  CPU per turn {side.cpu / count * 1000:.2f} ms  ({count} turns)"
        )
    for what, ours, base in (
        ("turn p50", statistics.median(on.turns), statistics.median(off.turns)),
        ("block time per turn", on.wall, off.wall),
        ("CPU per turn", on.cpu, off.cpu),
    ):
        ratio = ours / base
        print(f"ratio on/off {what}: {ratio:.3f} (overhead {100 * (ratio - 1):+.1f}%)")
    base_cpu = off.cpu / count
    for what, spent in (("building", threads.build), ("encoding and sending", threads.send)):
        per_turn = spent / count
        print(
            f"export threads, {what}: {per_turn * 1e6:.0f} µs CPU per exported turn "
            f"({100 * per_turn / base_cpu:.1f}% of the off side's CPU per turn)"
        )
    both = (threads.build + threads.send) / count
    print(f"export threads in all: {100 * both / base_cpu:.1f}% of the off side's CPU per turn")
    print(f"target: overhead < {100 * TARGET_OVERHEAD:.0f}% of the per-turn time")
    exported = (blocks + 1) * BLOCK  # the on-blocks and the warm-up's
    print(f"spans received: {spans} (expected {SPANS_PER_TURN * exported})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12, help=f"blocks of {BLOCK} turns a side")
    asyncio.run(main(parser.parse_args().blocks))
