"""A real `opencrab up` (tests/fakes/served.py) whose model, the fake OpenAI server,
answers every turn at once, with an agent and a REST session of it: what the bench
scripts compare a protocol's turn (A2A, MCP) against, a REST turn on the same server;
and `rotate`, their way of timing the sides in turn.

    async with served_turns() as on:
        by_rest, by_other = await rotate([on.rest_turn, other_turn], n=60, warm=5)
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.served import ServedOpenCrab

AGENT = "aki"
ANSWER = "Aye."
USAGE = {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}

Call = Callable[[], Awaitable[Any]]


@dataclass
class ServedTurns:
    served: ServedOpenCrab
    rest: httpx.AsyncClient
    """The REST client (the served base URL, its bearer token)."""
    session_id: str
    """A REST session of the agent AGENT."""

    async def rest_turn(self) -> None:
        """One REST turn in the session (`POST /api/sessions/{id}/messages`)."""
        said = await self.rest.post(
            f"/api/sessions/{self.session_id}/messages", json={"content": "count"}
        )
        assert said.status_code == 201, said.text


@asynccontextmanager
async def served_turns() -> AsyncIterator[ServedTurns]:
    """A served OpenCrab in a temporary folder whose model answers ANSWER at once, with
    the agent AGENT and one REST session of it; stopped on the way out."""
    llm = FakeLlmServer().start()
    llm.respond(CHAT, lambda _: Reply(json=completion({"content": ANSWER}, usage=USAGE)))
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            ServedOpenCrab(Path(tmp) / "data", llm=llm) as served,
        ):
            async with httpx.AsyncClient(
                base_url=served.url, headers=served.headers, timeout=120
            ) as rest:
                made = await rest.post("/api/agents", json={"name": AGENT, "prompt": "Be terse."})
                assert made.status_code == 201, made.text
                session = await rest.post("/api/sessions", json={"agentId": made.json()["id"]})
                assert session.status_code == 201, session.text
                yield ServedTurns(served, rest, session.json()["id"])
    finally:
        llm.stop()


async def rotate(calls: list[Call], n: int, warm: int) -> list[float]:
    """p50 seconds of each of `calls`, called in turn `n` times each after `warm` rounds;
    which goes first moves round by round, so machine noise hits all alike."""
    for _ in range(warm):
        for call in calls:
            await call()
    times: list[list[float]] = [[] for _ in calls]
    for i in range(n):
        for k in range(len(calls)):
            j = (i + k) % len(calls)
            start = time.perf_counter()
            await calls[j]()
            times[j].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]
