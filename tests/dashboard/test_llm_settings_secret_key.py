"""The LLM settings page after `secret.key` was replaced (issue 31, "Also" 5), in Chromium.

A real `opencrab up` stores a key, stops, gets another secret key and starts again: the
page says the stored key cannot be decrypted and what to do, storing another provider's
key shows the API's reason, and the connection test fails saying why.
"""

from __future__ import annotations

import re
from pathlib import Path

from cryptography.fernet import Fernet
from playwright.sync_api import Browser, expect

from opencrab.config.secret_key import FILE_NAME
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

KEY = "sk-or-v1-stored-before-the-swap-Zq9X"


def test_a_replaced_secret_key_is_said_on_the_page(
    browser: Browser, tmp_path: Path, llm: FakeLlmServer
) -> None:
    data = tmp_path / "data"
    with ServedOpenCrab(data, llm=llm) as served:
        body = {"baseUrl": llm.url + "/v1", "apiKey": KEY}
        with served.client(timeout=60) as api:
            stored = api.patch("/api/llm/providers/openrouter", json=body)
        assert stored.status_code == 200, stored.text
    (data / FILE_NAME).write_bytes(Fernet.generate_key())
    with ServedOpenCrab(data, llm=llm) as served:
        context = browser.new_context(
            base_url=served.url, viewport={"width": 1280, "height": 900}, locale="en-US"
        )
        served.sign_in(context)
        page = Watched(context.new_page(), served.url)
        try:
            p = page.page
            p.goto("/settings/llm")
            card = p.locator('[data-provider="openrouter"]')
            expect(card.locator("[data-key-problem]")).to_contain_text("cannot be decrypted")
            expect(card.locator("[data-key-problem]")).to_contain_text("OPENCRAB_SECRET_KEY")
            expect(card.locator(".badge.key-unused")).to_have_text("key not used")
            expect(card.locator(".badge.key")).to_have_count(0)

            card.get_by_role("button", name="Test connection").click()
            expect(card.locator("[data-test-result]")).to_contain_text("cannot be decrypted")
            assert not llm.requests_to("/v1/chat/completions")

            other = p.locator('[data-provider="anthropic"]')
            other.locator("#anthropic-key").fill("sk-ant-a-second-provider-EF56")
            page.allow("/api/llm/providers/anthropic")  # the 409 is the expected answer
            other.get_by_role("button", name="Save anthropic").click()
            error = other.locator(".form-error")
            expect(error).to_contain_text(re.compile("stored keys of openrouter cannot be"))
            expect(error).to_contain_text("OPENCRAB_SECRET_KEY")
            shoot(p, "llm-settings-secret-key-lost")
            page.check()
        finally:
            context.close()
