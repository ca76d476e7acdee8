"""A provider the config file uses with no key yet (issue 32, Major 4), in Chromium.

A user names `default_provider = "openai"` in their config file and has no key in the
environment: `opencrab up` starts anyway; the LLM settings page and the home page say
the provider needs a key and where to set it, a call to it fails saying the same, and
the key entered on the settings page is the one the model server receives.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, expect

from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

CHAT = "/v1/chat/completions"
KEY = "sk-entered-on-the-settings-page-Qx7T"


def test_a_provider_without_a_key_starts_and_says_where_to_set_it(
    browser: Browser, tmp_path: Path, llm: FakeLlmServer
) -> None:
    config = tmp_path / "opencrab.toml"
    config.write_text('[llm]\ndefault_provider = "openai"\n', encoding="utf-8")
    served = ServedOpenCrab(tmp_path / "data", llm=llm, args=("--config", str(config)))
    del served.env["OPENAI_API_KEY"]  # set nowhere: the user will enter it on the page
    with served:
        with served.client() as api:
            made = api.post("/api/agents", json={"name": "カニ助", "prompt": "簡潔に答える。"})
            assert made.status_code == 201, made.text
            shown = api.get("/api/llm/settings")
            assert shown.status_code == 200, shown.text
            providers = shown.json()["providers"]
            openai = next(p for p in providers if p["name"] == "openai")
            assert "OPENAI_API_KEY" in openai["needsKey"], openai
            assert "/settings/llm" in openai["needsKey"], openai
            anthropic = next(p for p in providers if p["name"] == "anthropic")
            assert anthropic["needsKey"] is None  # not used by the settings

        context = browser.new_context(
            base_url=served.url, viewport={"width": 1280, "height": 900}, locale="ja-JP"
        )
        served.sign_in(context)
        page = Watched(context.new_page(), served.url)
        try:
            p = page.page
            p.goto("/")
            banner = p.locator(".keys-needed")
            expect(banner.locator('[data-needs-key="openai"]')).to_contain_text("needs a key")
            expect(banner).to_contain_text("llm.providers.openai.api_key")
            expect(p.locator(".agent-card")).to_contain_text("カニ助")
            shoot(p, "home-provider-needs-a-key")

            p.goto("/settings/llm")
            card = p.locator('[data-provider="openai"]')
            expect(card.locator(".badge.needs-key")).to_have_text("needs a key")
            expect(card.locator("[data-needs-key]")).to_contain_text("OPENAI_API_KEY")
            expect(card.locator("[data-needs-key]")).to_contain_text("LLM settings page")
            expect(p.locator('[data-provider="anthropic"] .badge.needs-key')).to_have_count(0)
            card.get_by_role("button", name="Test connection").click()
            result = card.locator("[data-test-result]")
            expect(result).to_contain_text("openai needs an API key")
            expect(result).to_contain_text("OPENAI_API_KEY")
            assert not llm.requests_to(CHAT)  # refused before any call
            shoot(p, "llm-settings-provider-needs-a-key")

            card.locator("#openai-key").fill(KEY)
            card.get_by_role("button", name="Save openai").click()
            card = p.locator('[data-provider="openai"]')
            expect(card.locator(".badge.key")).to_contain_text("••••Qx7T")
            expect(card.locator(".badge.needs-key")).to_have_count(0)
            expect(card.locator("[data-needs-key]")).to_have_count(0)
            card.get_by_role("button", name="Test connection").click()
            expect(card.locator("[data-test-result]")).to_contain_text("Connected")
            assert llm.requests_to(CHAT)[-1].headers["authorization"] == f"Bearer {KEY}"

            p.goto("/")
            expect(p.locator(".agent-card")).to_contain_text("カニ助")
            expect(p.locator(".keys-needed")).to_have_count(0)
            page.check()
        finally:
            context.close()
