"""Seed 001's dashboard addresses and the `error` status of an agent card (issue 32,
"Seed 001 gaps"), in Chromium against a real `opencrab up`.

The seed's route table names `/agents`, `/skills`, `/memory` and `/workspace/{agent}`;
each leads to the page that shows it. An agent whose latest turn failed shows `error`
on its home card.
"""

from __future__ import annotations

from urllib.parse import unquote

import httpx
from playwright.sync_api import expect

from tests.dashboard.conftest import CHAT, DEFAULT_REPLY, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

QUIET = {"enabled": False}  # no heartbeat turn takes a reply meant for the chat


def path_of(page: Watched) -> str:
    return unquote(page.page.url.removeprefix(page.base_url))


def test_a_failing_agent_shows_error_and_the_seed_addresses_lead_to_pages(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    make_agent(api, "ナギ", language="ja", description="潮の満ち引きを記録する", heartbeat=QUIET)
    make_agent(api, "ソラ", language="ja", description="空模様を見る", heartbeat=QUIET)
    p = page.page

    # the model refuses every request: the turn ends in an error
    error = {"error": {"message": "model does not exist", "type": "invalid_request_error"}}
    llm.reply(CHAT, Reply(status=400, json=error))
    p.goto("/agents/ナギ/chat")
    box = p.get_by_label("Message to ナギ")
    box.fill("今日の潮は?")
    box.press("Enter")
    expect(p.locator(".msg.user .msg-text")).to_have_text("今日の潮は?")

    p.goto("/")  # the cards follow the turn live: in a turn, then error
    nagi = p.locator('.agent-card[data-agent="ナギ"]')
    expect(nagi).to_have_attribute("data-status", "error", timeout=90_000)
    expect(nagi.locator(".agent-status .badge")).to_have_text("error")
    expect(p.locator('.agent-card[data-agent="ソラ"]')).to_have_attribute("data-status", "idle")
    shoot(p, "home-agent-error")
    llm.reply(CHAT, Reply(json=completion({"content": DEFAULT_REPLY})))

    p.goto("/agents")
    assert path_of(page) == "/"
    expect(p.get_by_role("heading", name="Agents", exact=True)).to_be_visible()

    p.goto("/skills")  # two agents: choose one
    assert path_of(page) == "/skills"
    expect(p.locator(".choose-agent li")).to_have_count(2)
    shoot(p, "skills-choose-agent")
    p.get_by_role("link", name="ナギ").click()
    expect(p).to_have_url(page.base_url + "/agents/%E3%83%8A%E3%82%AE/skills")

    p.goto("/memory")
    expect(p.locator(".choose-agent li")).to_have_count(2)
    p.get_by_role("link", name="ソラ").click()
    expect(p).to_have_url(page.base_url + "/agents/%E3%82%BD%E3%83%A9/memory")

    p.goto("/workspace/ナギ")
    assert path_of(page) == "/agents/ナギ/workspace"
    with httpx.Client(base_url=page.base_url, headers=api.headers, timeout=60) as raw:
        missing = raw.get("/workspace/nobody")
        assert missing.status_code == 404
