"""The Gateways page (/settings/gateways) in Chromium, against a served OpenCrab and a fake
Slack (tests/fakes/slack_server.py) on its own loop in this process.

Settings typed in the page reach the gateway without restarting the server: Slack
connects (the state badge says so), answers a mention through the channel's agent, a bad
value is named under its field, the tokens never come back to the page, Slack going down
shows as retrying with its error and coming back as connected."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import CHAT, QUIET, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.fakes.slack_server import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    FakeSlack,
    fake_slack_in_thread,
)

LONG_WAIT = 60_000


@pytest.fixture
def slack() -> Iterator[tuple[FakeSlack, Callable[[Any], Any]]]:
    with fake_slack_in_thread() as found:
        yield found


def test_slack_set_up_in_the_page_connects_answers_and_shows_its_link(
    page: Watched,
    api: httpx.Client,
    slack: tuple[FakeSlack, Callable[[Any], Any]],
    fake_llm_server: FakeLlmServer,
) -> None:
    fake, run = slack
    make_agent(api, "aki", heartbeat=QUIET)
    make_agent(api, "庭師", heartbeat=QUIET, prompt="あなたは庭師です。")
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "水やりは朝にどうぞ。"})))
    p = page.page
    page.allow("HTTP 400")
    page.allow("status of 400")
    p.goto("/settings/gateways")
    expect(p.get_by_role("heading", name="Gateways", exact=True)).to_be_visible()
    expect(p.locator('nav a[aria-current="page"]')).to_have_text("Gateways")
    panel = p.locator('li[data-gateway="slack"]')
    expect(panel.locator("[data-link]")).to_have_text("off")
    expect(p.locator('li[data-gateway="discord"]')).to_be_visible()

    form = panel.locator("form[data-gateway-form]")
    if not form.is_visible():
        panel.locator("details.edit summary").click()
    form.locator("[name=enabled]").check()
    form.locator("[name=bot_token]").fill(BOT_TOKEN)
    form.locator("[name=app_token]").fill(APP_TOKEN)
    form.locator("[name=api_url]").fill(fake.api_url)
    form.locator("[name=agent]").fill("aki")
    form.locator("[name=allow_users]").fill("U0MINA\nU0HANA")
    form.locator("[name=channel_agents]").fill("C0GARDEN = 庭師")
    form.locator("[name=retry_first_secs]").fill("0.2")
    form.locator("[name=retry_cap_secs]").fill("0.5")
    form.locator("[name=ping_interval_secs]").fill("0.5")
    form.locator("[name=max_concurrent]").fill("0")
    form.get_by_role("button", name="Save and restart slack").click()
    expect(form.locator('[data-error-for="max_concurrent"]')).to_contain_text(
        "greater than or equal to 1"
    )
    form.locator("[name=max_concurrent]").fill("4")
    form.get_by_role("button", name="Save and restart slack").click()

    panel = p.locator('li[data-gateway="slack"]')
    expect(panel.locator("[data-link]")).to_have_text("connected", timeout=LONG_WAIT)
    expect(panel).to_contain_text("…" + BOT_TOKEN[-4:])
    expect(panel.locator("[name=channel_agents]")).to_have_value("C0GARDEN = 庭師\n")
    assert BOT_TOKEN not in p.content()
    assert APP_TOKEN not in p.content()
    assert BOT_TOKEN not in api.get("/api/gateways").text
    shoot(p, "gateways-connected")

    # the channel's agent answers a mention, in the thread
    mention = {
        "type": "app_mention",
        "user": "U0MINA",
        "text": f"<@{BOT_USER}> 今日の水やりは？",
        "ts": "1.1",
        "channel": "C0GARDEN",
    }
    run(fake.push("events_api", fake.event(mention)))
    run(fake.wait(lambda: bool(fake.posted)))
    assert fake.posted[0]["text"] == "水やりは朝にどうぞ。"
    assert fake.posted[0]["thread_ts"] == "1.1"
    asked = fake_llm_server.requests_to(CHAT)[-1].json
    assert "あなたは庭師です。" in str(asked)  # C0GARDEN's agent, not the gateway's aki

    # Slack down: retrying, with the error; back: connected again, without a reload
    run(fake.down())
    expect(panel.locator("[data-link]")).to_have_text("retrying", timeout=LONG_WAIT)
    expect(panel.locator("[data-link-error]")).to_contain_text("next try in", timeout=LONG_WAIT)
    shoot(p, "gateways-retrying")
    run(fake.up())
    expect(panel.locator("[data-link]")).to_have_text("connected", timeout=LONG_WAIT)
    expect(panel.locator("[data-link-error]")).to_be_hidden()

    # off again: stopped, and nothing else moved
    form = panel.locator("form[data-gateway-form]")
    if not form.is_visible():
        panel.locator("details.edit summary").click()
    form.locator("[name=enabled]").uncheck()
    form.get_by_role("button", name="Save and restart slack").click()
    expect(p.locator('li[data-gateway="slack"] [data-link]')).to_have_text("off", timeout=LONG_WAIT)
    assert api.get("/api/health").status_code == 200
