"""The LINE gateway's cost: a webhook in to the start of the agent's turn, against the same
turn through REST, in one process.

The app (`create_app`, the chat gateways on, a real SQLite store) runs in this process's
event loop and is called through httpx's ASGI transport; the LINE platform is the fake
of tests/fakes/line_platform.py on loopback (the gateway's real line-bot-sdk client sends
the replies there). The model is a scripted one that notes when each message reaches it:
that is the start of the turn. Each of `turns` rounds times

- LINE: POST /hooks/line with one signed text event (a new 1:1 chat each time) until the
  model is called for it;
- REST: POST /api/sessions/{id}/messages with the same text until the model is called.

Then 100 conversations at once: 100 webhooks posted together, every one must reach the
model and be answered (a reply through the reply token) — none lost.

`measure(turns)` returns the figures (bench/gateways.py gathers every gateway's);
`python bench/gateways_line.py [--turns 200]` prints them and the ratio LINE / REST.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AT_ONCE = 100


async def measure(turns: int) -> dict[str, Any]:
    """p50 (ms) of webhook-to-turn and REST-to-turn over `turns` rounds each, their
    difference and ratio, and how many of AT_ONCE simultaneous conversations were
    answered."""
    import os

    import httpx
    from tests.fakes.line_platform import SECRET, TOKEN, fake_line, sign, text_event, user
    from tests.fakes.line_platform import webhook as body_of
    from tests.fakes.scripted_provider import ScriptedProvider, reply

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.llm.router import LlmRouter
    from opencrab.llm.types import ChatRequest, ChatResponse
    from opencrab.server.app import create_app
    from opencrab.store import Database

    reached: dict[str, float] = {}

    class Noting(ScriptedProvider):
        async def chat_completion(self, request: ChatRequest) -> ChatResponse:
            text = request.messages[-1].content
            if isinstance(text, str):
                reached.setdefault(text, time.perf_counter())
            return await super().chat_completion(request)

    os.environ["LINE_CHANNEL_SECRET"] = SECRET
    os.environ["LINE_CHANNEL_ACCESS_TOKEN"] = TOKEN
    with tempfile.TemporaryDirectory() as data, fake_line() as line:
        settings = load_settings(
            overrides={
                "data_dir": data,
                "agent": {"memory_embedding": False},
                "gateway": {
                    "line": {
                        "enabled": True,
                        "agent": "aki",
                        "channel_secret": SECRET,
                        "channel_access_token": TOKEN,
                        "allow_users": ["*"],
                        "api_url": line.api_url,
                        "data_url": line.data_url,
                        "typing": False,
                        "max_concurrent": AT_ONCE,
                    }
                },
            }
        )
        db = Database(settings.database_url)
        db.upgrade()
        agent = AgentStore(db, settings).create(AgentCreate(name="aki", prompt="Be brief."))
        scripted = Noting("openai", reply("はい。"))
        router = LlmRouter(settings)
        router.register_provider(scripted)
        app = create_app(settings, db, router=router, gateways=True)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client,
        ):

            async def reach(text: str) -> float:
                while text not in reached:
                    await asyncio.sleep(0.0005)
                return reached[text]

            async def by_line(n: int, who: str) -> float:
                text = f"LINE {n} {who}"
                body = body_of(text_event(user(who), text, reply_token=line.issue_token()))
                started = time.perf_counter()
                answered = await client.post(
                    "/hooks/line", content=body, headers={"X-Line-Signature": sign(body)}
                )
                assert answered.status_code == 200, answered.text
                return await reach(text) - started

            async def by_rest(n: int) -> float:
                made = await client.post("/api/sessions", json={"agentId": agent.id})
                assert made.status_code == 201, made.text
                text = f"REST {n}"
                started = time.perf_counter()
                sent = client.post(
                    f"/api/sessions/{made.json()['id']}/messages", json={"content": text}
                )
                task = asyncio.ensure_future(sent)
                took = await reach(text) - started
                assert (await task).status_code == 201
                return took

            for n in range(5):  # warm both paths
                await by_line(-n - 1, f"Uwarm{n:028d}")
                await by_rest(-n - 1)
            line_ms, rest_ms = [], []
            for n in range(turns):
                line_ms.append(1000 * await by_line(n, f"U{n:032d}"))
                rest_ms.append(1000 * await by_rest(n))

            before = len(line.sent("reply"))
            began = time.perf_counter()
            await asyncio.gather(*(by_line(10_000 + n, f"Uall{n:029d}") for n in range(AT_ONCE)))
            deadline = time.monotonic() + 120
            while len(line.sent("reply")) < before + AT_ONCE and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            answered = len(line.sent("reply")) - before
            burst_secs = time.perf_counter() - began
    line_p50, rest_p50 = statistics.median(line_ms), statistics.median(rest_ms)
    return {
        "turns": turns,
        "line_p50_ms": round(line_p50, 3),
        "rest_p50_ms": round(rest_p50, 3),
        "added_p50_ms": round(line_p50 - rest_p50, 3),
        "ratio": round(line_p50 / rest_p50, 3) if rest_p50 else None,
        "at_once": AT_ONCE,
        "at_once_answered": answered,
        "at_once_secs": round(burst_secs, 2),
        # the keys bench/gateways.py reads of every platform
        "gateway_p50_ms": line_p50,
        "concurrent_sent": AT_ONCE,
        "concurrent_answered": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.turns))
    print(f"LINE webhook -> turn start  p50 {figures['line_p50_ms']:.2f} ms")
    print(f"REST message -> turn start  p50 {figures['rest_p50_ms']:.2f} ms")
    print(
        f"added by LINE               p50 {figures['added_p50_ms']:+.2f} ms "
        f"(ratio LINE/REST {figures['ratio']})"
    )
    print(
        f"{figures['at_once']} conversations at once: {figures['at_once_answered']} answered "
        f"in {figures['at_once_secs']} s"
    )


if __name__ == "__main__":
    main()
