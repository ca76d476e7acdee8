"""One hostile reply against the server: `/api/health` latency while it is processed.

OpenCrab runs as a subprocess (a real SQLite store, a scripted model in-process whose
reply to each message asks for `--calls` ws_write calls, then speaks). From this
process, one keep-alive connection asks `GET /api/health` every PROBE_GAP seconds and
times each answer:

1. idle: for `--secs` seconds, nothing else running (the baseline);
2. a hostile reply: while one `POST /api/sessions/{id}/messages` runs the turn (after
   a warm-up turn of the same agent that writes one file);
3. the same for a second agent whose workspace held `--files` files when the server
   started (each write used to walk them all for the quota).

Prints p50 / p99 / max of each, the turn's duration, and the ratio hostile / idle of
p50 and p99 in the same run. `--cap N` sets `[agent] max_tool_calls_per_reply` (give
the number of calls to run them all and see the loop stay free without the cap).

    python bench/hostile_turn.py [--calls 1000] [--files 100000] [--secs 3] [--cap N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.server_load import Connection, free_port, wait_up  # noqa: E402

PROBE_GAP = 0.01  # seconds between two health probes


# ------------------------------------------------------------------ the server (child)
def serve(port: int, data: str, calls: int, files: int, cap: int | None) -> None:
    import uvicorn
    from tests.fakes.scripted_provider import ScriptedProvider, reply

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.llm.router import LlmRouter
    from opencrab.llm.types import ToolCall
    from opencrab.server.app import create_app
    from opencrab.store import Database

    overrides: dict[str, Any] = {"data_dir": data}
    if cap is not None:
        overrides["agent"] = {"max_tool_calls_per_reply": cap}
    settings = load_settings(overrides=overrides)
    db = Database(settings.database_url)
    db.upgrade()
    store = AgentStore(db, settings)
    store.create(AgentCreate(name="target", prompt="Keep notes."))
    crowded = store.create(AgentCreate(name="crowded", prompt="Keep notes."))
    started = time.perf_counter()
    fill_workspace(data, crowded.id, files)
    print(f"  ({files} files put in a workspace in {time.perf_counter() - started:.1f} s)")

    def call(index: int, name: str, arguments: dict[str, Any]) -> ToolCall:
        raw = json.dumps(arguments)
        return ToolCall(id=f"c{index}", name=name, arguments=arguments, raw_arguments=raw)

    hostile = reply(
        tool_calls=[
            call(i, "ws_write", {"path": f"spam/{i}.txt", "content": f"line {i}\n" * 20})
            for i in range(calls)
        ]
    )
    speak = reply(tool_calls=[call(0, "send_speech", {"content": "Done."})])
    warm = reply(
        tool_calls=[
            call(0, "ws_write", {"path": "hello.txt", "content": "hello"}),
            call(1, "send_speech", {"content": "Hello."}),
        ]
    )
    router = LlmRouter(settings)
    # a warm-up turn for each agent, then a hostile reply to each
    router.register_provider(ScriptedProvider("openai", warm, warm, hostile, speak, hostile, speak))
    app = create_app(settings, db, router=router)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def fill_workspace(data: str, agent_id: str, files: int) -> None:
    """`files` small files in the agent's workspace, 1,000 per folder."""
    root = Path(data) / "agents" / agent_id / "workspace" / "old"
    for index in range(files):
        folder = root / f"{index // 1000:03d}"
        if index % 1000 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index}.txt").write_bytes(b"x" * 100)


# ------------------------------------------------------------------ measuring
async def probe(port: int, until: asyncio.Future[Any] | float) -> list[float]:
    """Health latencies (seconds) until `until` (a deadline or a future) is over."""
    conn = await Connection.open(port)
    latencies: list[float] = []
    try:
        while True:
            if isinstance(until, float) and time.perf_counter() >= until:
                break
            if not isinstance(until, float) and until.done():
                break
            started = time.perf_counter()
            status, _ = await conn.request("GET", "/api/health")
            latencies.append(time.perf_counter() - started)
            if status != 200:
                raise SystemExit(f"/api/health answered {status}")
            await asyncio.sleep(PROBE_GAP)
    finally:
        conn.close()
    return latencies


async def hostile_turn(port: int, session: str) -> tuple[list[float], float, dict[str, Any]]:
    """Health latencies while one message's turn runs; the turn's seconds and answer."""
    api = await Connection.open(port)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    async def post() -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        try:
            status, body = await api.request(
                "POST",
                f"/api/sessions/{session}/messages",
                json.dumps({"content": "Please write your notes."}).encode(),
            )
        finally:
            done.set_result(None)
        if status != 201:
            raise SystemExit(f"the turn answered {status}: {body[:300]!r}")
        return time.perf_counter() - started, json.loads(body)

    turn = asyncio.create_task(post())
    await asyncio.sleep(0.05)  # the request is in before the probes start
    latencies = await probe(port, done)
    took, answer = await turn
    api.close()
    return latencies, took, answer


def figures(latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    cuts = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    return {"n": len(ms), "p50": statistics.median(ms), "p99": cuts[98], "max": ms[-1]}


def show(name: str, f: dict[str, float]) -> None:
    print(
        f"  {name:<34} p50 {f['p50']:8.2f} ms   p99 {f['p99']:8.2f} ms   "
        f"max {f['max']:8.2f} ms   ({f['n']:.0f} probes)"
    )


def describe(answer: dict[str, Any]) -> str:
    actions = answer["turn"]["actions"]
    ran = sum(1 for a in actions if a["success"])
    return f"{len(actions)} tool results, {ran} successful"


# ------------------------------------------------------------------ main
async def main(args: argparse.Namespace) -> None:
    data = tempfile.mkdtemp(prefix="opencrab-hostile-")
    port = free_port()
    command = [sys.executable, __file__, "--serve", "--port", str(port), "--data", data]
    command += ["--calls", str(args.calls), "--files", str(args.files)]
    command += [] if args.cap is None else ["--cap", str(args.cap)]
    server = subprocess.Popen(command, cwd=ROOT)
    try:
        await wait_up(port)
        api = await Connection.open(port)
        _, body = await api.request("GET", "/api/agents")
        agents = {a["name"]: a["id"] for a in json.loads(body)}
        sessions = []
        for name in ("target", "crowded"):
            _, body = await api.request(
                "POST", "/api/sessions", json.dumps({"agentId": agents[name]}).encode()
            )
            sessions.append(json.loads(body)["id"])
        for session in sessions:  # warm-up: first turn, first write (the files are counted)
            status, _ = await api.request(
                "POST", f"/api/sessions/{session}/messages", json.dumps({"content": "hi"}).encode()
            )
            assert status == 201, status
        api.close()
        cap = "default" if args.cap is None else str(args.cap)
        print(f"/api/health every {PROBE_GAP * 1000:.0f} ms; a reply of {args.calls} ws_write")
        print(f"calls ([agent] max_tool_calls_per_reply: {cap})")

        idle = figures(await probe(port, time.perf_counter() + args.secs))
        show(f"idle ({args.secs:.0f} s)", idle)

        latencies, took, answer = await hostile_turn(port, sessions[0])
        busy = figures(latencies)
        show(f"during the reply ({took:.2f} s)", busy)
        print(f"    the turn: {describe(answer)}")

        latencies, took, answer = await hostile_turn(port, sessions[1])
        full = figures(latencies)
        show(f"same, {args.files} files there ({took:.2f} s)", full)
        print(f"    the turn: {describe(answer)}")

        for name, f in (("during the reply", busy), (f"with {args.files} files", full)):
            print(
                f"  ratio {name} / idle: p50 {f['p50'] / idle['p50']:.2f}, "
                f"p99 {f['p99'] / idle['p99']:.2f}, max {f['max'] / idle['max']:.2f}"
            )
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--secs", type=float, default=3.0)
    parser.add_argument("--cap", type=int)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--port", type=int)
    parser.add_argument("--data")
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.data, args.calls, args.files, args.cap)
    else:
        asyncio.run(main(args))
