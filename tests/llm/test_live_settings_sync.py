"""LLM settings across processes and across calls in flight.

Two runtimes on one database stand for two processes (`opencrab up` and `opencrab
worker`): each has its own Database, router and providers, and they share nothing but
the store. OpenRouter speaks the OpenAI wire format, so the fake server sees the key a
runtime used in the Authorization header of its call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from opencrab.cli.common import settings_from
from opencrab.config import Settings
from opencrab.config.loader import load_settings
from opencrab.core.runtime import Runtime
from opencrab.errors import ConfigError, ProviderNotConfigured
from opencrab.llm.router import CallInfo
from opencrab.llm.types import ChatRequest, Message
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

CHAT = "/v1/chat/completions"
KEY = "sk-or-v1-first-secret-AB12"
NEW_KEY = "sk-or-v1-second-secret-CD34"


@asynccontextmanager
async def runtime_on(settings: Settings, url: str) -> AsyncIterator[Runtime]:
    """A runtime with its own connection pool, router and providers (a process)."""
    db = Database(url)
    db.upgrade()
    try:
        async with Runtime.open(settings, db=db) as runtime:
            runtime.llm_settings.check_secs = 0.0  # every call reads the settings version
            yield runtime
    finally:
        db.close()


async def ping(runtime: Runtime) -> str:
    request = ChatRequest(model="openrouter/m1", messages=[Message.user("ping")], max_tokens=1)
    reply = await runtime.router.chat_with_provider("openrouter", request, CallInfo())
    return reply.text or ""


async def test_a_key_set_through_one_process_is_used_by_the_other(
    settings: Settings, any_db: Database, store_url: str, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(runtime_on(settings, store_url))
        worker = await stack.enter_async_context(runtime_on(settings, store_url))
        assert "openrouter" not in worker.router.usable  # no key anywhere yet
        changes = {"base_url": fake_llm_server.url + "/v1", "api_key": KEY}
        await server.llm_settings.update_provider("openrouter", changes, actor="local")

        assert await ping(worker) == "pong"
        assert fake_llm_server.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"

        await server.llm_settings.update_provider("openrouter", {"api_key": NEW_KEY}, actor="x")
        await ping(worker)
        seen = fake_llm_server.requests_to(CHAT)[-1].headers["authorization"]
        assert seen == f"Bearer {NEW_KEY}"

        # aliases and the fallback chain follow too
        await server.llm_settings.set_alias("mine", "openrouter", "x/y", actor="local")
        await server.llm_settings.set_chain(["openrouter", "mine"], actor="local")
        await ping(worker)
        assert worker.router.aliases["mine"].model == "x/y"
        assert worker.router.fallback_chain == ["openrouter", "mine"]

        # switched off in one process: the other stops using it on its next call
        await server.llm_settings.update_provider("openrouter", {"enabled": False}, actor="x")
        calls = len(fake_llm_server.requests_to(CHAT))
        failed = await asyncio.gather(ping(worker), return_exceptions=True)
        assert isinstance(failed[0], Exception)
        assert len(fake_llm_server.requests_to(CHAT)) == calls
        assert "openrouter" not in worker.router.providers


async def test_an_unchanged_version_leaves_the_providers_alone(
    settings: Settings, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    async with runtime_on(settings, settings.database_url) as runtime:
        changes = {"base_url": fake_llm_server.url + "/v1", "api_key": KEY}
        await runtime.llm_settings.update_provider("openrouter", changes, actor="local")
        built = runtime.router.providers["openrouter"]
        await ping(runtime)
        await ping(runtime)
        assert runtime.router.providers["openrouter"] is built  # not built again per call


async def test_a_call_in_flight_ends_on_the_provider_it_started_with(
    settings: Settings, fake_llm_server: FakeLlmServer
) -> None:
    gate = threading.Event()
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "slow"}), gate=gate))
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    async with runtime_on(settings, settings.database_url) as runtime:
        changes = {"base_url": fake_llm_server.url + "/v1", "api_key": KEY}
        await runtime.llm_settings.update_provider("openrouter", changes, actor="local")
        old = runtime.router.providers["openrouter"]
        running = asyncio.create_task(ping(runtime))
        while not fake_llm_server.requests_to(CHAT):  # the call reached the server
            await asyncio.sleep(0.01)
        await runtime.llm_settings.update_provider("openrouter", {"api_key": NEW_KEY}, actor="x")
        assert runtime.router.providers["openrouter"] is not old
        gate.set()
        assert await running == "slow"  # finished on the old instance
        assert await ping(runtime) == "pong"  # the next call runs on the new one
        seen = [r.headers["authorization"] for r in fake_llm_server.requests_to(CHAT)]
        assert seen == [f"Bearer {KEY}", f"Bearer {NEW_KEY}"]
        assert not runtime.router.retiring  # the old one was closed once its call ended


def write_config(tmp_path: Path, fake_llm_server: FakeLlmServer) -> Path:
    """A config file that relies on OpenRouter (its key set nowhere but the dashboard)."""
    config = tmp_path / "mine.toml"
    config.write_text(
        '[llm]\ndefault_provider = "openrouter"\ndefault_model = "m1"\n'
        '[llm.fallback]\nchain = ["openrouter"]\n'
        f'[llm.providers.openrouter]\nbase_url = "{fake_llm_server.url}/v1"\n',
        encoding="utf-8",
    )
    return config


async def test_a_provider_the_config_file_uses_may_take_its_key_from_the_dashboard(
    settings: Settings, tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "pong"})))
    config = write_config(tmp_path, fake_llm_server)
    with pytest.raises(ConfigError, match="OPENROUTER_API_KEY is not set"):
        load_settings(config)  # a library caller that reads no store: as before
    mine = settings_from(config, None)  # what every command loads
    request = ChatRequest(model="", messages=[Message.user("ping")], max_tokens=1)
    async with runtime_on(mine, mine.database_url) as runtime:  # starts without the key
        assert any("openrouter needs an API key" in n for n in runtime.notices)
        with pytest.raises(ProviderNotConfigured) as refused:
            await runtime.router.chat(request)
    message = str(refused.value)
    assert "enter one on the dashboard's LLM settings page (/settings/llm)" in message
    assert "set llm.providers.openrouter.api_key in your config file" in message
    assert "or export OPENROUTER_API_KEY" in message

    async with runtime_on(settings, settings.database_url) as runtime:  # no file: starts
        await runtime.llm_settings.update_provider("openrouter", {"api_key": KEY}, actor="me")
    async with runtime_on(mine, mine.database_url) as runtime:
        with pytest.raises(ProviderNotConfigured) as refused:  # entered for openrouter.ai
            await runtime.router.chat(request)
    assert "was entered for https://openrouter.ai" in str(refused.value)
    assert fake_llm_server.requests_to(CHAT) == []

    async with runtime_on(settings, settings.database_url) as runtime:  # for the file's origin
        await runtime.llm_settings.update_provider(
            "openrouter", {"api_key": KEY, "base_url": fake_llm_server.url + "/v1"}, actor="me"
        )
    async with runtime_on(mine, mine.database_url) as runtime:  # the stored key counts
        assert runtime.router.default.provider == "openrouter"
        assert (await runtime.router.chat(request)).text == "pong"
    assert fake_llm_server.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"
