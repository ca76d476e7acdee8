"""The Telegram gateway as `opencrab up` runs it: the app's lifespan starts it from its
`[gateway.telegram]` table, bearer-token auth on, and Telegram's webhook reaches
/hooks/telegram without a token of ours, proved by its secret alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.sessions import session_messages
from opencrab.llm.router import LlmRouter
from opencrab.messages import session_for
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.telegram_api import FakeTelegram

SECRET = "hook-secret_42"


async def test_the_server_starts_the_bot_and_its_webhook_needs_the_secret_not_a_token(
    tmp_path: Path,
) -> None:
    fake = FakeTelegram()
    with fake.serving():
        table: dict[str, Any] = {
            "enabled": True,
            "token": fake.token,
            "api_url": fake.url,
            "allow_users": ["42"],
            "mode": "webhook",
            "webhook_url": "https://crab.example/hooks/telegram",
            "webhook_secret": SECRET,
        }
        settings = load_settings(
            overrides={"data_dir": str(tmp_path), "gateway": {"telegram": table}}
        )
        db = Database(settings.database_url)
        db.upgrade()
        aki = AgentStore(db, settings).create(AgentCreate(name="aki", prompt="Answer."))
        model = ScriptedProvider("openai", "hello from the server")
        router = LlmRouter(settings)
        router.register_provider(model)
        app = create_app(settings, db, router=router, auth=True, gateways=True)
        update = {
            "update_id": 5,
            "message": {
                "message_id": 77,
                "date": 0,
                "chat": fake.chat(42),
                "from": fake.user(42, "sam"),
                "text": "hi",
            },
        }
        try:
            async with app.router.lifespan_context(app):
                gateway = app.state.runtime.outlets["telegram"]
                async with asyncio.timeout(60):
                    while gateway.connection.state.state != "connected":
                        await asyncio.sleep(0.01)
                assert fake.webhook["secret_token"] == SECRET
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://localhost"
                ) as client:
                    assert (await client.get("/api/agents")).status_code == 401  # auth is on
                    hook = "/hooks/telegram"
                    header = "X-Telegram-Bot-Api-Secret-Token"
                    wrong = await client.post(hook, json=update, headers={header: "nope"})
                    assert wrong.status_code == 401
                    right = await client.post(hook, json=update, headers={header: SECRET})
                    assert right.status_code == 200
                    [answer] = await fake.wait_for("sendMessage")
        finally:
            db.close()
    assert answer.params["text"] == "hello from the server"
    assert answer.params["reply_parameters"]["message_id"] == 77
    messages = session_messages(db, session_for("telegram", "42", aki.id), limit=5)
    assert [m.content for m in messages] == ["hi", "hello from the server"]
