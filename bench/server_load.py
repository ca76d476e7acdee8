"""Load on the server: REST throughput, 1,000 concurrent reads, 200 live WebSocket clients.

Two servers run side by side as subprocesses under the same uvicorn settings: OpenCrab's
app as `opencrab up` builds it (a real SQLite store with 10 agents, a scripted model
in-process, the started heap frozen) and, as the baseline, a bare Starlette endpoint
returning the same agent list as a constant. The load comes from this process through a
minimal keep-alive HTTP/1.1 client on asyncio streams, so the client costs little next to
the servers.

1. `GET /api/agents` for `--secs` seconds from 64 connections, against each server in
   turn (ROUNDS rounds, alternating): requests/s, and the CPU time each server process
   used per request (user + system, from /proc), with both ratios OpenCrab / bare
   Starlette. On a machine other work shares, requests/s follow what the scheduler gives
   each process (a server or the client that got less CPU in one run looks slower); CPU
   per request does not, and its ratio is the throughput ratio of one free core each.
2. 1,000 `GET /api/agents` started at once, each on its own connection: all must be 200.
3. 200 WebSocket clients subscribe to one session; 5 messages are posted to it over
   REST: every client must receive every event of those turns; prints the time from the
   first post to the last delivery and events delivered per second. Errors: failed
   posts and clients whose connection failed or that heard nothing for 60 s, and
   clients that ended with missing, extra or repeated events (a client that holds every
   event is done, also when it got them before the bench knew how many to expect).
4. A turn over REST: `POST /api/sessions/{id}/messages` (each in a new session, the
   scripted model answering at once with send_speech), p50 per turn, beside the engine
   alone running the same turn (`engine.process`, as bench/engine_turn.py does) in this
   process on a SQLite store of its own: the difference is what the REST path adds.
   The server keeps working after a turn (its memory index embeds the turn's log lines
   on a worker thread), which the engine alone never does: half the turns are timed once
   the server's CPU has gone quiet (the REST path's own cost), half right after the
   previous turn (what a client posting back to back waits, that work included); and the
   server's CPU per turn, that work included.

Prints errors for parts 1-3 (must all be 0). bench/rest_profile.py shows where the time
of one `GET /api/agents` goes, by layer.

    python bench/server_load.py [--secs 5] [--parts 1,2,3,4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AGENTS = 10
CONNECTIONS = 64
BURST = 1000
WS_CLIENTS = 200
TURNS = 5
TURN_WARM_UP = 20
REST_TURNS = 200
ROUNDS = 3


# ------------------------------------------------------------------ the servers (children)
def serve_opencrab(port: int, data: str) -> None:
    import uvicorn
    from tests.fakes.scripted_provider import ScriptedProvider

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.llm.router import LlmRouter
    from opencrab.server.app import create_app
    from opencrab.store import Database

    # the bench's WebSocket clients all come from 127.0.0.1: room for all of them
    settings = load_settings(
        overrides={"data_dir": data, "gateway": {"rest": {"ws_max_per_client": WS_CLIENTS}}}
    )
    db = Database(settings.database_url)
    db.upgrade()
    store = AgentStore(db, settings)
    for i in range(AGENTS):
        store.create(AgentCreate(name=f"agent-{i}", prompt="Be brief.", description="bench"))
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", speech()))
    app = create_app(settings, db, router=router, freeze_startup=True)  # as `opencrab up`
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve_bare(port: int, body: str) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    payload = body.encode()

    async def agents(_: Any) -> Response:
        return Response(payload, media_type="application/json")

    app = Starlette(routes=[Route("/api/agents", agents)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args], cwd=ROOT)


async def wait_up(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status, _ = await fetch_once(port, "/api/agents")
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit(f"server on port {port} did not start")


# ------------------------------------------------------------------ a small HTTP client
class Connection:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def fetch_once(port: int, path: str) -> tuple[int, bytes]:
    conn = await Connection.open(port)
    try:
        return await conn.request("GET", path)
    finally:
        conn.close()


# ------------------------------------------------------------------ 1. throughput
async def throughput(port: int, secs: float) -> tuple[float, int]:
    """Requests/s over `secs` from CONNECTIONS keep-alive connections; and errors."""
    stop = time.perf_counter() + secs
    done = errors = 0

    async def worker() -> None:
        nonlocal done, errors
        conn = await Connection.open(port)
        try:
            while time.perf_counter() < stop:
                status, _ = await conn.request("GET", "/api/agents")
                done += 1
                errors += status != 200
        finally:
            conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    return done / (time.perf_counter() - started), errors


# ------------------------------------------------------------------ 2. a burst
async def burst(port: int) -> tuple[int, int, float]:
    """BURST reads at once, one connection each: (ok, errors, seconds)."""

    async def one() -> bool:
        try:
            status, body = await fetch_once(port, "/api/agents")
            return status == 200 and len(json.loads(body)) == AGENTS
        except OSError:
            return False

    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(BURST)))
    ok = sum(results)
    return ok, BURST - ok, time.perf_counter() - started


# ------------------------------------------------------------------ 3. live WebSocket clients
async def live_clients(port: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    api = await Connection.open(port)
    _, body = await api.request("GET", "/api/agents")
    agent_id = json.loads(body)[0]["id"]
    _, body = await api.request("POST", "/api/sessions", json.dumps({"agentId": agent_id}).encode())
    session = json.loads(body)["id"]

    errors = 0  # failed posts, and clients whose connection failed or went silent
    received: list[list[str]] = [[] for _ in range(WS_CLIENTS)]
    last_delivery = 0.0
    expected: list[str] = []
    known = asyncio.Event()  # `expected` is filled: a client holding all of it is done
    failed: set[int] = set()

    def has_all(i: int) -> bool:
        return known.is_set() and len(received[i]) >= len(expected)

    async def client(i: int, ready: asyncio.Event, go: asyncio.Event) -> None:
        nonlocal errors, last_delivery
        try:
            async with connect(f"ws://127.0.0.1:{port}/api/ws", max_queue=None) as ws:
                await ws.send(json.dumps({"type": "subscribe", "sessionId": session}))
                assert json.loads(await ws.recv())["type"] == "subscribed"
                ready.set()
                await go.wait()
                deadline = time.perf_counter() + 60
                while not has_all(i):
                    # a client may hold every event before the list of expected ones is
                    # known: it waits for that list, not for events that never come
                    receiving = asyncio.ensure_future(ws.recv())
                    waiting = asyncio.ensure_future(known.wait())
                    done, _ = await asyncio.wait(
                        {receiving, waiting},
                        timeout=max(0.0, deadline - time.perf_counter()),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    waiting.cancel()
                    if receiving in done:
                        message = json.loads(receiving.result())
                        received[i].append(message["event"]["id"])
                        last_delivery = time.perf_counter()
                        continue
                    receiving.cancel()
                    if not done:
                        raise TimeoutError(
                            f"silent for 60 s with {len(received[i])} of "
                            f"{len(expected) if known.is_set() else '?'} events"
                        )
        except Exception as exc:
            errors += 1
            failed.add(i)
            print(f"  client {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
            ready.set()

    connect_started = time.perf_counter()
    readies = [asyncio.Event() for _ in range(WS_CLIENTS)]
    go = asyncio.Event()
    tasks = [asyncio.create_task(client(i, readies[i], go)) for i in range(WS_CLIENTS)]
    for ready in readies:
        await ready.wait()
    connected = time.perf_counter() - connect_started
    go.set()

    api.close()  # idle while the clients connected: past the server's keep-alive
    api = await Connection.open(port)
    posted = time.perf_counter()
    for n in range(TURNS):
        status, _ = await api.request(
            "POST",
            f"/api/sessions/{session}/messages",
            json.dumps({"content": f"message {n}"}).encode(),
        )
        errors += status != 201
    _, body = await api.request("GET", f"/api/traces/{session}/events")
    expected.extend(e["id"] for e in json.loads(body))
    known.set()
    await asyncio.wait(tasks, timeout=90)
    for task in tasks:
        task.cancel()
    api.close()
    # a client that got exactly the expected events, each once, is complete; one with
    # fewer, more or duplicates is wrong (printed), apart from those that failed outright
    complete = sum(1 for got in received if sorted(got) == sorted(expected))
    wrong = [
        (i, len(got), len(set(got)))
        for i, got in enumerate(received)
        if i not in failed and sorted(got) != sorted(expected)
    ]
    for i, count, distinct in wrong[:5]:
        print(
            f"  client {i}: {count} events ({distinct} distinct), expected {len(expected)}",
            file=sys.stderr,
        )
    delivered = sum(len(got) for got in received)
    span = max(last_delivery - posted, 1e-9)
    return {
        "clients": WS_CLIENTS,
        "connect_secs": connected,
        "events_per_turn": len(expected) / TURNS,
        "complete_clients": complete,
        "delivered": delivered,
        "span_secs": span,
        "failed": errors,
        "wrong": len(wrong),
    }


# ------------------------------------------------------------------ 4. a turn over REST
def speech() -> Any:
    """The scripted model's reply in both legs of part 4 (and the served app's)."""
    from tests.fakes.scripted_provider import reply

    from opencrab.llm.types import ToolCall

    return reply(
        tool_calls=[
            ToolCall(
                id="c1",
                name="send_speech",
                arguments={"content": "Noted."},
                raw_arguments='{"content": "Noted."}',
            )
        ]
    )


async def settled(pid: int, *, quiet_secs: float = 0.05, most_secs: float = 3.0) -> None:
    """Wait until the process `pid` has used no CPU for `quiet_secs` (at most `most_secs`):
    the server's work after a turn (the memory index embeds the turn's log lines on a
    worker thread) is over before the next turn is timed."""
    deadline = time.monotonic() + most_secs
    while time.monotonic() < deadline:
        before = cpu_secs(pid)
        await asyncio.sleep(quiet_secs)
        if cpu_secs(pid) == before:
            return


async def rest_turns(port: int, pid: int, turns: int) -> tuple[list[float], list[float], float]:
    """Seconds per `POST /api/sessions/{id}/messages`, each in a new session: timed right
    after the previous turn, and timed once the server has settled (see `settled`); and
    the server's CPU seconds per turn, its work after the turn included."""
    api = await Connection.open(port)
    try:
        _, body = await api.request("GET", "/api/agents")
        agent_id = json.loads(body)[-1]["id"]
        back_to_back: list[float] = []
        quiet: list[float] = []
        cpu = 0.0
        for n in range(TURN_WARM_UP + 2 * turns):
            status, body = await api.request(
                "POST", "/api/sessions", json.dumps({"agentId": agent_id}).encode()
            )
            session = json.loads(body)["id"]
            calm = n % 2 == 1
            if calm:
                await settled(pid)
            before, started = cpu_secs(pid), time.perf_counter()
            status, body = await api.request(
                "POST", f"/api/sessions/{session}/messages", b'{"content": "Hello!"}'
            )
            took = time.perf_counter() - started
            if status != 201:
                raise SystemExit(f"a turn over REST failed: {status} {body[:300]!r}")
            if n >= TURN_WARM_UP:
                (quiet if calm else back_to_back).append(took)
                if calm:
                    await settled(pid)
                    cpu += cpu_secs(pid) - before
        return back_to_back, quiet, cpu / turns
    finally:
        api.close()


async def engine_turns(turns: int) -> list[float]:
    """Seconds per turn of the engine alone (bench/engine_turn.py's way: engine.process),
    the same scripted reply, a new session each, on a SQLite store of its own."""
    from tests.fakes.scripted_provider import ScriptedProvider

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate
    from opencrab.core.runtime import Runtime
    from opencrab.core.sessions import ensure_chat_session
    from opencrab.llm.router import LlmRouter
    from opencrab.messages import CliSource, IncomingMessage
    from opencrab.store import Database

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(overrides={"data_dir": tmp})
        db = Database(settings.database_url)
        db.upgrade()
        router = LlmRouter(settings)
        router.register_provider(ScriptedProvider("openai", speech()))
        times = []
        async with Runtime.open(settings, db=db, router=router) as runtime:
            agent = runtime.agents.create(AgentCreate(name="bench", prompt="Be brief."))
            for n in range(TURN_WARM_UP + turns):
                session = ensure_chat_session(db, agent.id)
                message = IncomingMessage.text("Hello!", source=CliSource(session_id=session))
                started = time.perf_counter()
                await runtime.engine.process(agent, message, session_id=session)
                if n >= TURN_WARM_UP:
                    times.append(time.perf_counter() - started)
        db.close()
        return times


# ------------------------------------------------------------------ main
def cpu_secs(pid: int) -> float:
    """CPU seconds (user + system, every thread) the process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measured(port: int, pid: int, secs: float) -> tuple[float, float, int]:
    """(requests/s, the server's CPU µs per request, errors) of one throughput run."""
    before = cpu_secs(pid)
    rate, errors = await throughput(port, secs)
    return rate, (cpu_secs(pid) - before) / (rate * secs) * 1e6, errors


async def part_throughput(ours: subprocess.Popen[bytes], ours_port: int, secs: float) -> None:
    _, agents = await fetch_once(ours_port, "/api/agents")
    bare_port = free_port()
    bare = start("--serve", "bare", "--port", str(bare_port), "--body", agents.decode())
    try:
        await wait_up(bare_port)
        print(
            f"GET /api/agents ({AGENTS} agents), {CONNECTIONS} connections, {secs:.0f} s each, "
            f"{ROUNDS} rounds alternating"
        )
        runs: dict[str, list[tuple[float, float]]] = {"opencrab": [], "bare": []}
        errors = 0
        for _ in range(ROUNDS):
            for name, port, pid in (
                ("opencrab", ours_port, ours.pid),
                ("bare", bare_port, bare.pid),
            ):
                rate, cpu, failed = await measured(port, pid, secs)
                runs[name].append((rate, cpu))
                errors += failed
        best = {name: max(rate for rate, _ in values) for name, values in runs.items()}
        cpu = {name: min(c for _, c in values) for name, values in runs.items()}
        for name, label in (("opencrab", "OpenCrab      "), ("bare", "bare Starlette")):
            print(
                f"  {label} {best[name]:7.0f} req/s, {cpu[name]:5.0f} µs of server CPU per "
                "request (runs: " + ", ".join(f"{r:.0f}/s {c:.0f} µs" for r, c in runs[name]) + ")"
            )
        print(f"  ratio OpenCrab / bare Starlette, req/s: {best['opencrab'] / best['bare']:.2f}")
        print(
            "  ratio by server CPU per request (what one core serves; the figure to read "
            f"when other work shares the machine): {cpu['bare'] / cpu['opencrab']:.2f}"
        )
        print(f"  errors: {errors}")
    finally:
        bare.terminate()
        bare.wait(30)


async def main(secs: float, parts: set[int]) -> None:
    data = tempfile.mkdtemp(prefix="opencrab-load-")
    ours_port = free_port()
    ours = start("--serve", "opencrab", "--port", str(ours_port), "--data", data)
    try:
        await wait_up(ours_port)
        if 1 in parts:
            await part_throughput(ours, ours_port, secs)

        if 2 in parts:
            ok, failed, took = await burst(ours_port)
            print(f"{BURST} concurrent GET /api/agents: {ok} ok, {failed} errors in {took:.2f} s")

        if 3 in parts:
            live = await live_clients(ours_port)
            print(
                f"{live['clients']} WebSocket clients on one session: connected and subscribed "
                f"in {live['connect_secs']:.2f} s; {TURNS} turns × "
                f"{live['events_per_turn']:.0f} events; "
                f"{live['complete_clients']} clients got every event; "
                f"{live['delivered']} deliveries in {live['span_secs']:.2f} s "
                f"({live['delivered'] / live['span_secs']:.0f} events/s); errors: "
                f"{live['failed']} failed (a post, a connection, 60 s of silence), "
                f"{live['wrong']} clients with missing, extra or repeated events"
            )

        if 4 in parts:
            back_to_back, quiet, cpu = await rest_turns(ours_port, ours.pid, REST_TURNS)
            engine = statistics.median(await engine_turns(REST_TURNS))
            rest, calm = statistics.median(back_to_back), statistics.median(quiet)
            print(
                f"POST /api/sessions/{{id}}/messages, instant scripted model, {REST_TURNS} turns "
                f"each way: p50 {calm * 1000:.1f} ms per turn on a settled server, "
                f"{rest * 1000:.1f} ms right after the previous turn (its memory indexing "
                f"still running); the engine alone (engine.process, as bench/engine_turn.py) "
                f"{engine * 1000:.1f} ms: OpenCrab's REST path adds {(calm - engine) * 1000:.1f} "
                f"ms per turn (x{calm / engine:.2f}), {(rest - engine) * 1000:.1f} ms back to "
                f"back; the server's CPU per turn, its work after the turn included: "
                f"{cpu * 1000:.1f} ms"
            )
    finally:
        ours.terminate()
        ours.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secs", type=float, default=5.0)
    parser.add_argument(
        "--parts", default="1,2,3,4", help="which parts to run, e.g. 1,4 (default: all)"
    )
    parser.add_argument("--serve", choices=("opencrab", "bare"))
    parser.add_argument("--port", type=int)
    parser.add_argument("--data")
    parser.add_argument("--body")
    args = parser.parse_args()
    if args.serve == "opencrab":
        serve_opencrab(args.port, args.data)
    elif args.serve == "bare":
        serve_bare(args.port, args.body)
    else:
        os.environ.setdefault("PYTHONHASHSEED", "0")
        asyncio.run(main(args.secs, {int(p) for p in args.parts.split(",")}))
