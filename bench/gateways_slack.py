"""bench/gateways.py's Slack leg: Socket Mode through the real slack_sdk client against
the tests' fake Slack (tests/fakes/slack_server.py), next to REST on the same app.

The app (`create_app(..., gateways=True)`, `[gateway.slack]` pointed at the fake) is
served by uvicorn on 127.0.0.1 in a thread; the fake Slack runs in this loop. A turn's
start is when `TurnService.steps` is entered for its message (patched here to note the
time); both paths use the same clock (time.perf_counter)."""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.slack_server import APP_TOKEN, BOT_TOKEN, BOT_USER, FakeSlack
from tests.fakes.threaded_server import serve_in_thread

from opencrab.config import load_settings
from opencrab.core import turns as turns_module
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database

CONCURRENT = 100
started: dict[str, float] = {}


def _note_turn_starts() -> None:
    original = turns_module.TurnService.steps

    async def steps(self: Any, agent: Any, message: Any, **options: Any) -> AsyncIterator[Any]:
        started.setdefault(message.content.text, time.perf_counter())
        async for step in original(self, agent, message, **options):
            yield step

    turns_module.TurnService.steps = steps  # type: ignore[method-assign]


async def _until(check: Any, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.0005)


async def measure(turns: int) -> dict[str, Any]:
    _note_turn_starts()
    fake = FakeSlack()
    await fake.up()
    home = tempfile.mkdtemp(prefix="bench-gateways-")
    os.environ["OPENCRAB_HOME"] = home
    os.environ["OPENCRAB_AGENT__MEMORY_EMBEDDING"] = "false"
    settings = load_settings()
    slack = {
        "enabled": True,
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "api_url": fake.api_url,
        "allow_channels": ["*"],
        "max_concurrent": 16,
    }
    db = Database(settings.database_url)
    db.upgrade()
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", reply("ok")))
    app = create_app(settings, db, router=router, gateways=True)
    gateway_ms: list[float] = []
    rest_ms: list[float] = []
    try:
        with serve_in_thread(app, free_port()) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                agent = (
                    await http.post("/api/agents", json={"name": "aki", "prompt": "Hi."})
                ).json()
                session = (await http.post("/api/sessions", json={"agentId": agent["id"]})).json()
                # set up as the dashboard does: stored settings, then a restart
                await http.put("/api/gateways/slack", json={"settings": slack})
                restarted = await http.post("/api/gateways/slack/restart")
                assert restarted.status_code == 200, restarted.text
                await _until(lambda: fake.connections > 0, 60)
                await asyncio.sleep(0.2)  # the hello is handled
                for i in range(turns):
                    text = f"slack {i}"
                    event = {
                        "type": "app_mention",
                        "user": "U1",
                        "channel": "C1",
                        "text": f"<@{BOT_USER}> {text}",
                        "ts": f"{i + 1}.0001",
                    }
                    before = len(fake.posted)
                    sent = time.perf_counter()
                    await fake.push("events_api", fake.event(event))
                    await _until(lambda t=text: t in started)
                    gateway_ms.append((started[text] - sent) * 1000)
                    await _until(lambda b=before: len(fake.posted) > b)

                    text = f"rest {i}"
                    sent = time.perf_counter()
                    answer = await http.post(
                        f"/api/sessions/{session['id']}/messages", json={"content": text}
                    )
                    assert answer.status_code == 201, answer.text
                    rest_ms.append((started[text] - sent) * 1000)

                before = len(fake.posted)
                await asyncio.gather(
                    *(
                        fake.push(
                            "events_api",
                            fake.event(
                                {
                                    "type": "app_mention",
                                    "user": "U1",
                                    "channel": "C2",
                                    "text": f"<@{BOT_USER}> at once {i}",
                                    "ts": f"{10_000 + i}.0001",
                                }
                            ),
                        )
                        for i in range(CONCURRENT)
                    )
                )
                await _until(lambda: len(fake.posted) - before >= CONCURRENT, 300)
                threads = {p["thread_ts"] for p in fake.posted[before:]}
    finally:
        await fake.down()
        db.close()
    return {
        "gateway_p50_ms": statistics.median(gateway_ms),
        "rest_p50_ms": statistics.median(rest_ms),
        "concurrent_sent": CONCURRENT,
        "concurrent_answered": len(threads),
    }
