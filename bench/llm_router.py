"""Router overhead: LlmRouter.chat vs a direct OpenAI SDK call to the same local server.

Both talk to one fake OpenAI-compatible server on loopback (tests/fakes/llm_server.py),
alternating call by call, and which goes first, so machine noise hits both alike. The
router path includes everything a real call pays: alias resolution, request mapping,
the provider's SDK call, response mapping, pricing and queueing the metrics row
(written by the background writer into a real SQLite database in the same process).

    python bench/llm_router.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from openai import AsyncOpenAI
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.llm_server import FakeLlmServer, Reply

from opencrab.config import load_settings
from opencrab.config.models import ProviderConfig
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.llm.router import CallInfo, LlmRouter
from opencrab.llm.types import ChatRequest, Message
from opencrab.store import Database

COMPLETION = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 1767225600,
    "model": "gpt-5-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
}


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-5-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


STREAM: list[object] = [
    chunk({"role": "assistant", "content": ""}),
    *[chunk({"content": word + " "}) for word in ["Hello", "there", "how", "can", "I", "help"]],
    chunk({}, "stop"),
    {**chunk({}), "choices": [], "usage": COMPLETION["usage"]},
    "[DONE]",
]


async def measure(calls: int) -> dict[str, float]:
    server = FakeLlmServer().start()
    server.reply("/v1/chat/completions", Reply(json=COMPLETION))
    tmp = tempfile.TemporaryDirectory()
    db = Database(f"sqlite:///{Path(tmp.name) / 'bench.db'}")
    db.upgrade()
    settings = load_settings(env={})
    recorder = MetricsRecorder(db)
    router = LlmRouter(settings, metrics=recorder)
    config = ProviderConfig(api_key=SecretStr("sk-bench"), base_url=f"{server.url}/v1")
    router.register_provider(OpenAIProvider(config, name="openai"))
    sdk = AsyncOpenAI(api_key="sk-bench", base_url=f"{server.url}/v1", max_retries=0)
    messages = [{"role": "user", "content": "hello"}]
    request = ChatRequest(model="fast", messages=[Message.user("hello")])
    info = CallInfo(purpose="conversation", agent_id="bench")

    async def direct() -> None:
        await sdk.chat.completions.create(model="gpt-5-mini", messages=messages)  # type: ignore[arg-type]

    async def routed() -> None:
        await router.chat(request, info)

    async def direct_ttft() -> float:
        start = time.perf_counter()
        stream = await sdk.chat.completions.create(
            model="gpt-5-mini",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        first = 0.0
        async for part in stream:
            if not first and part.choices and part.choices[0].delta.content:
                first = time.perf_counter() - start
        return first

    async def routed_ttft() -> float:
        start = time.perf_counter()
        first = 0.0
        async for part in router.stream(request, info):
            if not first and part.text:
                first = time.perf_counter() - start
        return first

    for _ in range(20):  # warm up connections, caches, the metrics writer
        await direct()
        await routed()
    direct_times, routed_times = [], []
    pair = ((direct, direct_times), (routed, routed_times))
    for n in range(calls):  # who goes first alternates, so neither gains from the order
        for fn, sink in pair if n % 2 else pair[::-1]:
            start = time.perf_counter()
            await fn()
            sink.append(time.perf_counter() - start)
    server.reset()
    server.reply("/v1/chat/completions", Reply(sse=STREAM))
    direct_first, routed_first = [], []
    for n in range(calls // 2):
        if n % 2:
            direct_first.append(await direct_ttft())
            routed_first.append(await routed_ttft())
        else:
            routed_first.append(await routed_ttft())
            direct_first.append(await direct_ttft())
    await recorder.aclose()
    await router.aclose()
    await sdk.close()
    server.stop()
    db.close()
    tmp.cleanup()
    ms = 1000
    return {
        "direct_p50": statistics.median(direct_times) * ms,
        "routed_p50": statistics.median(routed_times) * ms,
        "added_p50": (statistics.median(routed_times) - statistics.median(direct_times)) * ms,
        "direct_ttft_p50": statistics.median(direct_first) * ms,
        "routed_ttft_p50": statistics.median(routed_first) * ms,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    r = asyncio.run(measure(args.calls))
    print(f"calls: {args.calls} of each kind, interleaved, against one local fake server")
    print(f"direct SDK call p50:   {r['direct_p50']:.3f} ms")
    print(f"LlmRouter.chat p50:    {r['routed_p50']:.3f} ms")
    ratio = r["routed_p50"] / r["direct_p50"]
    print(f"added latency p50:     {r['added_p50']:.3f} ms (ratio {ratio:.2f})")
    print(f"stream TTFT p50: direct {r['direct_ttft_p50']:.3f} ms,", end=" ")
    print(f"router {r['routed_ttft_p50']:.3f} ms")
    print(f"TTFT overhead p50:     {r['routed_ttft_p50'] - r['direct_ttft_p50']:.3f} ms")
    verdict = "met" if r["added_p50"] < 1.0 else "NOT met"
    print(f"target (added latency < 1 ms at p50): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
