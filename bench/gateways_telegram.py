"""Telegram: a message from the platform to the start of the agent's turn, against the same
turn through REST; and 100 conversations at once.

One process: the app (`create_app` with its lifespan, `gateways=True`, so the Telegram
gateway starts as `opencrab up` starts it) over a fresh SQLite store, a scripted model
in-process, and the fake Bot API (tests/fakes/telegram_api.py) on 127.0.0.1 that
python-telegram-bot long-polls. The clock starts when the update is queued on the fake
platform (Telegram's side) or when the REST request is sent, and stops when the model is
asked (the turn's first step); each turn is the first of a new conversation on both
sides (a Telegram chat, a REST session made beforehand), so history does not grow; p50
of each over `turns` turns, and the difference.
Then 100 private chats each send a message at once: every one must get its reply.

    python bench/gateways_telegram.py [--turns 200]

`measure(turns)` returns the figures (bench/gateways.py reads them).
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

from tests.fakes.scripted_provider import ScriptedProvider  # noqa: E402
from tests.fakes.telegram_api import FakeTelegram  # noqa: E402

CONVERSATIONS = 100


class Clocked(ScriptedProvider):
    """The scripted model, noting when each turn first asks it."""

    def __init__(self) -> None:
        super().__init__("openai", "ok")
        self.asked: asyncio.Queue[float] = asyncio.Queue()

    async def chat_completion(self, request: Any) -> Any:
        self.asked.put_nowait(time.perf_counter())
        return await super().chat_completion(request)


async def measure(turns: int) -> dict[str, Any]:
    """p50 (ms) from the message to the turn's start, Telegram and REST; the 100-chat run."""
    import httpx

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.llm.router import LlmRouter
    from opencrab.server.app import create_app
    from opencrab.store import Database

    fake = FakeTelegram()
    with tempfile.TemporaryDirectory() as data, fake.serving():
        table = {
            "enabled": True,
            "token": fake.token,
            "api_url": fake.url,
            "poll_timeout": 5,
            "allow_users": ["*"],
            "agent": "aki",
            "typing": False,
            "max_concurrent": CONVERSATIONS,
        }
        settings = load_settings(overrides={"data_dir": data, "gateway": {"telegram": table}})
        db = Database(settings.database_url)
        db.upgrade()
        AgentStore(db, settings).create(AgentCreate(name="aki", prompt="Answer briefly."))
        model = Clocked()
        router = LlmRouter(settings)
        router.register_provider(model)
        app = create_app(settings, db, router=router, gateways=True)
        async with app.router.lifespan_context(app):
            gateway = app.state.runtime.outlets["telegram"]
            async with asyncio.timeout(60):
                while gateway.connection.state.state != "connected":
                    await asyncio.sleep(0.01)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as rest:
                telegram_ms, rest_ms = [], []
                for n in range(turns + 5):  # the first five warm both paths up
                    chat, user = fake.chat(10_000 + n), fake.user(10_000 + n, "bench")
                    created = await rest.post("/api/sessions", json={"agentId": "aki"})
                    session = created.json()["id"]
                    began = time.perf_counter()
                    fake.message(f"hello {n}", chat=chat, user=user)
                    asked = await model.asked.get()
                    await fake.wait_for("sendMessage", n + 1)
                    if n >= 5:
                        telegram_ms.append((asked - began) * 1000)
                    began = time.perf_counter()
                    posting = asyncio.create_task(
                        rest.post(f"/api/sessions/{session}/messages", json={"content": f"hi {n}"})
                    )
                    asked = await model.asked.get()
                    assert (await posting).status_code == 201
                    if n >= 5:
                        rest_ms.append((asked - began) * 1000)
            answered = await _crowd(fake, model)
        db.close()
    telegram_p50, rest_p50 = statistics.median(telegram_ms), statistics.median(rest_ms)
    return {
        "turns": turns,
        "telegram_p50_ms": round(telegram_p50, 3),
        "rest_p50_ms": round(rest_p50, 3),
        "added_ms": round(telegram_p50 - rest_p50, 3),
        "ratio": round(telegram_p50 / rest_p50, 2) if rest_p50 else None,
        "conversations": CONVERSATIONS,
        "answered": answered,
        "lost": CONVERSATIONS - answered,
        # the keys bench/gateways.py reads of every platform
        "gateway_p50_ms": telegram_p50,
        "concurrent_sent": CONVERSATIONS,
        "concurrent_answered": answered,
    }


async def _crowd(fake: FakeTelegram, model: Clocked) -> int:
    """100 chats write at once; how many got their reply (in their own chat)."""
    before = len(fake.of("sendMessage"))
    for chat_id in range(1000, 1000 + CONVERSATIONS):
        fake.message("all at once", chat=fake.chat(chat_id), user=fake.user(chat_id))
    async with asyncio.timeout(120):
        while len(fake.of("sendMessage")) < before + CONVERSATIONS:
            await asyncio.sleep(0.02)
    replied = {c.params["chat_id"] for c in fake.of("sendMessage")[before:]}
    return len(replied & {str(c) for c in range(1000, 1000 + CONVERSATIONS)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    figures = asyncio.run(measure(parser.parse_args().turns))
    print(
        f"message -> turn start, p50 over {figures['turns']} turns: "
        f"Telegram {figures['telegram_p50_ms']:.2f} ms, REST {figures['rest_p50_ms']:.2f} ms; "
        f"Telegram adds {figures['added_ms']:.2f} ms (ratio {figures['ratio']})"
    )
    print(
        f"{figures['conversations']} conversations at once: {figures['answered']} answered, "
        f"{figures['lost']} lost"
    )


if __name__ == "__main__":
    main()
