"""A provider from an installed plugin is a provider like the built-ins
(docs/architecture.md, "Extension points").

A throwaway distribution (a `*.dist-info` whose `entry_points.txt` names the module under
the `opencrab` group) is put on the server's PYTHONPATH; its provider imports only from
`opencrab.ext`. A real `opencrab up` then takes it: the config names it and sets its own
option, a turn is routed to it, its key is set through the LLM settings API and shown on
the settings page, and the call's metrics row costs what the provider's default price says.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.fakes.browser import Watched, launch, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

PLUGIN_SOURCE = '''
"""An LLM provider that answers locally: its greeting (an option) and the user's words."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from opencrab.ext import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    Choice,
    LlmProvider,
    Message,
    ModelInfo,
    Price,
    ProviderFacts,
    ProviderOptions,
    Usage,
    hookimpl,
)


class EchoOptions(ProviderOptions):
    greeting: str = "hello"


class EchoProvider(LlmProvider):
    name = "echo"
    facts = ProviderFacts(
        key_env="ECHO_PLUGIN_API_KEY",
        base_url=False,
        prices=(Price("echo-1", 2.0, 4.0),),
        options=EchoOptions,
    )

    def is_configured(self) -> bool:
        return self.config.api_key is not None and bool(self.config.api_key.get_secret_value())

    def _reply(self, request: ChatRequest) -> tuple[str, Usage]:
        self.api_key()  # ProviderNotConfigured without a key
        said = [m.text for m in request.messages if m.role == "user"][-1]
        return f"{self.options.greeting}: {said}", Usage.of(250_000, 125_000)

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        text, usage = self._reply(request)
        return ChatResponse(
            id=str(uuid.uuid4()),
            model=request.model,
            provider=self.name,
            choices=[Choice(message=Message.assistant(text), finish_reason="stop")],
            usage=usage,
        )

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        text, usage = self._reply(request)
        yield ChatChunk(text=text, model=request.model)
        yield ChatChunk(finish_reason="stop", usage=usage, model=request.model)

    async def available_models(self) -> list[ModelInfo]:
        return [ModelInfo(id="echo-1", provider=self.name, context_window=8192)]

    async def health_check(self) -> bool:
        return True


@hookimpl
def register_providers(register):
    register(EchoProvider)
'''

CONFIG = """
[llm]
default_provider = "echo"
default_model = "echo-1"

[llm.providers.echo]
greeting = "ahoy"
"""


def install_plugin(site: Path) -> None:
    """A real distribution in `site`: the module and its dist-info with the entry point."""
    (site / "opencrab_echo_provider.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    info = site / "opencrab_echo_provider-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: opencrab-echo-provider\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[opencrab]\necho = opencrab_echo_provider\n", encoding="utf-8"
    )


def test_the_plugin_imports_only_the_public_path() -> None:
    imported = set()
    for node in ast.walk(ast.parse(textwrap.dedent(PLUGIN_SOURCE))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    assert {m for m in imported if m.startswith("opencrab")} == {"opencrab.ext"}


@pytest.fixture
def served(tmp_path: Path, fake_llm_server: FakeLlmServer) -> ServedOpenCrab:
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site)
    config = tmp_path / "opencrab.toml"
    config.write_text(CONFIG, encoding="utf-8")
    return ServedOpenCrab(
        tmp_path / "data",
        llm=fake_llm_server,
        env={"PYTHONPATH": str(site), "OPENCRAB_CONFIG": str(config)},
    )


def test_a_plugin_provider_is_configured_keyed_routed_and_priced(served: ServedOpenCrab) -> None:
    with served, served.client() as client:
        view = client.get("/api/llm/settings").json()
        names = [p["name"] for p in view["providers"]]
        assert (names[0], names[-1]) == ("openai", "echo")  # built-ins first, then plugins
        echo = view["providers"][-1]
        assert (echo["takesKey"], echo["takesBaseUrl"]) == (True, False)
        assert echo["keyEnv"] == "ECHO_PLUGIN_API_KEY"
        assert echo["hasKey"] is False
        assert "ECHO_PLUGIN_API_KEY" in echo["needsKey"]  # the config uses it, no key yet

        changed = client.patch("/api/llm/providers/echo", json={"apiKey": "echo-secret-4242"})
        assert changed.status_code == 200, changed.text
        assert (changed.json()["hasKey"], changed.json()["keyLast4"]) == (True, "4242")
        refused = client.patch("/api/llm/providers/echo", json={"baseUrl": "http://x.example"})
        assert refused.status_code == 400, refused.text
        assert "takes no base URL" in refused.json()["message"]

        page = client.get("/settings/llm")
        assert page.status_code == 200
        assert 'data-provider="echo"' in page.text
        assert "ECHO_PLUGIN_API_KEY" in page.text
        assert "••••4242" in page.text

        # no heartbeat: its tick (every 29 s by default) would be a second call to count
        parrot = {"name": "parrot", "prompt": "Repeat.", "heartbeat": {"enabled": False}}
        agent = client.post("/api/agents", json=parrot)
        assert agent.status_code == 201, agent.text
        session = client.post("/api/sessions", json={"agentId": agent.json()["id"]}).json()
        turn = client.post(f"/api/sessions/{session['id']}/messages", json={"content": "crabs"})
        assert turn.status_code == 201, turn.text
        assert turn.json()["turn"]["reply"]["content"] == "ahoy: crabs"

        look_in_chromium(served)

        usage = client.get("/api/llm/monitoring", params={"period": "day"}).json()
        row = next(p for p in usage["providers"] if p["provider"] == "echo")
        assert (row["inputTokens"], row["outputTokens"]) == (250_000, 125_000)
        # 250k input at $2/1M and 125k output at $4/1M: the provider's default price
        assert row["costUsd"] == pytest.approx(0.5 + 0.5)


def look_in_chromium(served: ServedOpenCrab) -> None:
    """The settings page in a browser: the plugin's card with its key and variable."""
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(
                base_url=served.url, viewport={"width": 1280, "height": 900}
            )
            served.sign_in(context)
            watched = Watched(context.new_page(), served.url)
            watched.page.goto("/settings/llm")
            card = watched.page.locator('li.provider[data-provider="echo"]')
            expect(card.locator(".badge.key")).to_have_text("key ••••4242")
            expect(card.locator(".key-env")).to_contain_text("ECHO_PLUGIN_API_KEY")
            expect(card.locator("#echo-url")).to_have_count(0)  # no base URL applies
            shoot(watched.page, "llm-settings-plugin-provider")
            watched.check()
        finally:
            browser.close()


def config_show(site: Path | None, config: Path) -> subprocess.CompletedProcess[str]:
    """`opencrab config show` with `config`, the plugin installed in `site` (or none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    env["OPENCRAB_CONFIG"] = str(config)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    exe = str(Path(sys.executable).parent / "opencrab")
    return subprocess.run(
        [exe, "config", "show"], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_plugin_providers_options_are_checked_by_its_model(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site)
    config = tmp_path / "opencrab.toml"
    config.write_text(CONFIG, encoding="utf-8")
    shown = config_show(site, config)
    assert shown.returncode == 0, shown.stderr
    assert "ahoy" in shown.stdout

    config.write_text(CONFIG + "greting = 'typo'\n", encoding="utf-8")
    typo = config_show(site, config)
    assert typo.returncode == 2, typo.stdout
    assert "llm.providers.echo.greting: unknown key for this provider" in typo.stderr

    config.write_text(CONFIG.replace("greeting = ", "greeting = 7 #"), encoding="utf-8")
    wrong = config_show(site, config)
    assert wrong.returncode == 2, wrong.stdout
    assert "llm.providers.echo.greeting: Input should be a valid string" in wrong.stderr


def test_without_the_plugin_its_name_is_an_unknown_provider(tmp_path: Path) -> None:
    config = tmp_path / "opencrab.toml"
    config.write_text(CONFIG, encoding="utf-8")
    shown = config_show(None, config)
    assert shown.returncode == 2, shown.stdout
    assert "llm.providers.echo: unknown provider 'echo' (registered: openai," in shown.stderr
