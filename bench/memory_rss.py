"""Memory of a served OpenCrab: concurrent turns, many agents, a leak check over many turns.

Each part runs a real `opencrab up` subprocess (tests/fakes/served.py) on its own SQLite
store, its model the fake OpenAI server (tests/fakes/llm_server.py) in this process, and
reads the server's resident memory from /proc/PID/status (VmRSS; VmHWM, the peak, after
resetting it through /proc/PID/clear_refs).

1. Concurrent turns: `--concurrent` (200) chat sessions each get a message at once
   (`POST /api/sessions/{id}/messages`); the model streams its reply slowly (a chunk every
   `--chunk-secs`, `--chunks` of them; a call that does not stream waits as long). Prints
   the idle server's RSS (after a few warm-up turns) and the peak during the turns, and
   the growth (target < 150 MB).
2. Many agents: `--agents` (10,000) agents written to the store before the server starts
   (heartbeats on, as created by default); RSS once `GET /api/agents` has listed them
   all (target < 400 MB), beside an empty server's RSS from the same run.
3. Leak check: `--turns` (10,000) turns one after another (a new session every 100), the
   model answering at once; RSS after the first 1,000 and at the end, and whether it grew
   by more than 10 MB (the allocator keeps some freed memory: a few MB are not a leak).

    python bench/memory_rss.py [--concurrent N] [--agents N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from tests.fakes.llm_server import FakeLlmServer, Recorded, Reply
from tests.fakes.openai_bodies import chunk, completion
from tests.fakes.served import ServedOpenCrab

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.store import Database

CHAT = "/v1/chat/completions"
MB = 1024 * 1024
GROWTH_LIMIT = 150  # MB, part 1
AGENTS_LIMIT = 400  # MB, part 2
LEAK_SLACK = 10  # MB of growth between 1k and the end still counted as none
LEAK_FIRST = 1000
SESSION_TURNS = 100


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def rss_mb(pid: int) -> float:
    return status_kb(pid, "VmRSS") / 1024


def peak_mb(pid: int) -> float:
    return status_kb(pid, "VmHWM") / 1024


def reset_peak(pid: int) -> None:
    """VmHWM starts again from the current RSS (clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


class SlowModel:
    """Replies "Noted." after `chunks` x `chunk_secs`: streamed chunk by chunk, or at once."""

    def __init__(self, llm: FakeLlmServer, chunks: int, chunk_secs: float) -> None:
        self.chunks, self.chunk_secs = chunks, chunk_secs
        llm.respond(CHAT, self.answer)

    def answer(self, request: Recorded) -> Reply:
        body = request.json or {}
        words = ["No", "ted", "."] + [" "] * max(0, self.chunks - 3)
        if body.get("stream"):
            events: list[Any] = [chunk({"role": "assistant", "content": ""})]
            events += [chunk({"content": w}) for w in words[: self.chunks]]
            events += [chunk(finish="stop"), chunk(usage=USAGE), "[DONE]"]
            return Reply(sse=events, event_delay=self.chunk_secs)
        text = "".join(words[: self.chunks]).strip()
        return Reply(
            json=completion({"content": text}, usage=USAGE),
            delay=self.chunks * self.chunk_secs,
        )


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def served(home: Path, llm: FakeLlmServer, **env: str) -> ServedOpenCrab:
    return ServedOpenCrab(home, llm=llm, env=env)


async def turn(client: httpx.AsyncClient, session_id: str, text: str) -> None:
    response = await client.post(f"/api/sessions/{session_id}/messages", json={"content": text})
    if response.status_code != 201:
        raise RuntimeError(f"a turn failed: {response.status_code} {response.text[:300]}")


async def new_session(client: httpx.AsyncClient, agent_id: str) -> str:
    response = await client.post("/api/sessions", json={"agentId": agent_id})
    if response.status_code != 201:
        raise RuntimeError(f"POST /api/sessions: {response.status_code} {response.text[:300]}")
    return str(response.json()["id"])


async def make_agent(client: httpx.AsyncClient, name: str) -> str:
    response = await client.post("/api/agents", json={"name": name, "prompt": "Be brief."})
    if response.status_code != 201:
        raise RuntimeError(f"POST /api/agents: {response.status_code} {response.text[:300]}")
    return str(response.json()["id"])


def client_of(server: ServedOpenCrab, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(
        base_url=server.url, headers=server.headers, timeout=600, limits=limits
    )


# ------------------------------------------------------------------ 1. concurrent turns
async def concurrent_turns(
    llm: FakeLlmServer, n: int, chunks: int, chunk_secs: float
) -> tuple[float, float]:
    """(idle RSS, peak RSS during n concurrent slow turns), in MB."""
    home = Path(tempfile.mkdtemp(prefix="opencrab-bench-rss-"))
    server = served(home / "data", llm).start()
    try:
        async with client_of(server, n) as client:
            agent_id = await make_agent(client, "speaker")
            sessions = [await new_session(client, agent_id) for _ in range(n)]
            for session_id in sessions[:5]:  # warm-up: code loaded, connections open
                await turn(client, session_id, "hello")
            await asyncio.sleep(1.0)
            idle = rss_mb(server.pid)
            reset_peak(server.pid)
            await asyncio.gather(*(turn(client, s, "hello again") for s in sessions))
            peak = peak_mb(server.pid)
    finally:
        server.stop()
    return idle, peak


# ------------------------------------------------------------------ 2. many agents
async def many_agents(llm: FakeLlmServer, n: int) -> tuple[float, float]:
    """(RSS of a server with no agents, RSS of one with n agents listed), in MB."""
    results: list[float] = []
    for count in (0, n):
        home = Path(tempfile.mkdtemp(prefix="opencrab-bench-rss-")) / "data"
        home.mkdir(parents=True)
        if count:
            settings = load_settings(env={"OPENCRAB_HOME": str(home)})
            db = Database(settings.database_url)
            db.upgrade()
            store = AgentStore(db, settings)
            for i in range(count):
                store.create(AgentCreate(name=f"agent-{i:05}", prompt="Be brief."))
            db.close()
        server = served(home, llm).start()
        try:
            async with client_of(server, 4) as client:
                listed = await client.get("/api/agents")
                if listed.status_code != 200 or len(listed.json()) != count:
                    raise RuntimeError(f"GET /api/agents listed {len(listed.json())} of {count}")
                await asyncio.sleep(2.0)  # heartbeats scheduled, the list served
                results.append(rss_mb(server.pid))
        finally:
            server.stop()
    return results[0], results[1]


# ------------------------------------------------------------------ 3. leak check
async def sequential_turns(llm: FakeLlmServer, n: int) -> tuple[float, float, float, Path]:
    """(RSS after LEAK_FIRST turns, after n, seconds per turn, the server's log)."""
    home = Path(tempfile.mkdtemp(prefix="opencrab-bench-rss-"))
    server = served(home / "data", llm).start()
    first = 0.0
    started = time.perf_counter()
    try:
        async with client_of(server, 1) as client:
            agent_id = await make_agent(client, "talker")
            session_id = ""
            for i in range(n):
                if i % SESSION_TURNS == 0:
                    session_id = await new_session(client, agent_id)
                await turn(client, session_id, f"message {i}")
                if i + 1 == min(LEAK_FIRST, n):
                    first = rss_mb(server.pid)
            last = rss_mb(server.pid)
        log = home / "server.log"
        log.write_text(server.output())
    finally:
        server.stop()
    return first, last, (time.perf_counter() - started) / n, log


async def main(args: argparse.Namespace) -> None:
    for name in list(os.environ):  # a developer's own settings do not leak into the servers
        if name.startswith("OPENCRAB_"):
            del os.environ[name]
    with FakeLlmServer() as llm:
        model = SlowModel(llm, args.chunks, args.chunk_secs)
        if "concurrent" in args.parts:
            idle, peak = await concurrent_turns(llm, args.concurrent, args.chunks, args.chunk_secs)
            print(
                f"1. {args.concurrent} concurrent turns, the model streaming {args.chunks} chunks "
                f"{args.chunk_secs * 1000:.0f} ms apart: idle {idle:.0f} MB, peak {peak:.0f} MB, "
                f"growth {peak - idle:.0f} MB (target < {GROWTH_LIMIT} MB)",
                flush=True,
            )
        if "agents" in args.parts:
            empty, full = await many_agents(llm, args.agents)
            print(
                f"2. {args.agents} agents listed: RSS {full:.0f} MB (target < {AGENTS_LIMIT} MB); "
                f"with no agents {empty:.0f} MB (+{full - empty:.0f} MB, "
                f"{(full - empty) * 1024 / max(args.agents, 1):.1f} KB per agent)",
                flush=True,
            )
        if "turns" in args.parts:
            model.chunks, model.chunk_secs = 3, 0.0
            first, last, per_turn, log = await sequential_turns(llm, args.turns)
            grew = last - first
            verdict = "no growth" if grew <= LEAK_SLACK else "GROWS (see the log)"
            print(
                f"3. {args.turns} sequential turns ({per_turn * 1000:.0f} ms each): RSS "
                f"{first:.0f} MB after {min(LEAK_FIRST, args.turns)}, {last:.0f} MB after "
                f"{args.turns}: {grew:+.0f} MB, {verdict} (slack {LEAK_SLACK} MB); log {log}",
                flush=True,
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"({os.cpu_count()} CPUs, load average {load})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=20, help="chunks per streamed reply")
    parser.add_argument("--chunk-secs", type=float, default=0.1, help="seconds between chunks")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument(
        "--parts", nargs="+", default=["concurrent", "agents", "turns"],
        choices=["concurrent", "agents", "turns"],
    )  # fmt: skip
    asyncio.run(main(parser.parse_args()))
