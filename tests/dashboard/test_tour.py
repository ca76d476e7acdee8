"""Every page of the dashboard, visited in turn as a new user would: each renders with no
console error, no failed request and nothing from another host (the `page` fixture),
has one main landmark and labelled controls, fits a 1024 px wide window, and is
screenshotted in light and dark theme with Japanese text."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

UNLABELLED = """() => [...document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button')]
  .filter((el) => el.offsetParent !== null || el.getClientRects().length)
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
      && !el.getAttribute('aria-labelledby') && !(el.tagName === 'BUTTON' && el.textContent.trim())
      && !el.title)
  .map((el) => el.outerHTML.slice(0, 120))"""


@pytest.fixture
def tour(api: httpx.Client, fake_llm_server: FakeLlmServer) -> dict[str, str]:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "東京は晴れています。"})))
    agent = make_agent(
        api,
        "ツアー",
        description="ダッシュボードを案内するエージェント。",
        language="ja",
        heartbeat={"enabled": False},
    )
    session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    said = api.post(f"/api/sessions/{session}/messages", json={"content": "今日の天気は？"})
    assert said.status_code == 201, said.text
    written = api.put(
        f"/api/agents/{agent['id']}/workspace/メモ.md",
        content="# メモ\n\n東京は晴れ。".encode(),
        headers={"Content-Type": "text/markdown"},
    )
    assert written.status_code in (200, 201), written.text
    return {"agent": agent["name"], "session": session}


# the top bar's links and brand whose text breaks over more than one line
WRAPPED_IN_TOPBAR = """
[...document.querySelectorAll('.topbar a')].filter(a =>
  [...a.childNodes].some(node => {
    if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) return false;
    const range = document.createRange();
    range.selectNodeContents(node);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1;
  })
).map(a => a.textContent.trim())
"""


def test_every_page_renders_cleanly_at_1024_px(page: Watched, tour: dict[str, str]) -> None:
    name = quote(tour["agent"])
    pages = {
        "home": "/",
        "persona": f"/agents/{name}/persona",
        "skills": f"/agents/{name}/skills",
        "memory": f"/agents/{name}/memory?q=東京",
        "workspace": f"/agents/{name}/workspace?path={quote('メモ.md')}",
        "agent-sessions": f"/agents/{name}/sessions",
        "chat": f"/agents/{name}/chat?session={tour['session']}",
        "sessions": "/sessions",
        "session": f"/sessions/{tour['session']}",
        "discussion-new": "/discussions/new",
        # issue 21's pages on a store with no metrics or imports yet: their empty states
        "transcripts": "/transcripts",
        "analytics": "/analytics",
        "agent-analytics": f"/agents/{name}/analytics",
        "costs": "/costs",
        "budgets": "/budgets",
        "llm-settings": "/settings/llm",
        "mcp": "/settings/mcp",
        "gateways": "/settings/gateways",
        "agent-llm": f"/agents/{name}/llm",
        "session-trace": f"/sessions/{tour['session']}/trace",
        "agent-mode": "/agent-mode",
        "inbox": "/inbox",
    }
    page.page.set_viewport_size({"width": 1024, "height": 800})
    for label, path in pages.items():
        response = page.page.goto(path)
        assert response is not None
        assert response.status == 200, (path, response.status)
        page.page.wait_for_load_state("networkidle")
        expect(page.page.locator("main#main")).to_have_count(1)
        assert page.page.locator("h1").count() >= 1, path
        assert page.page.evaluate(UNLABELLED) == [], path
        overflow = page.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than a 1024 px window"
        assert page.page.evaluate(WRAPPED_IN_TOPBAR) == [], f"{path}: the top bar wraps"
        if label in ("session", "chat"):  # the reply of the turn, read on the server
            expect(page.page.get_by_text("東京は晴れています。").first).to_be_visible()
        shoot(page.page, f"tour-{label}")


def test_the_first_tab_stop_skips_to_the_content(page: Watched) -> None:
    page.page.goto("/")
    page.page.keyboard.press("Tab")
    skip = page.page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.page.keyboard.press("Enter")
    expect(page.page.locator("main#main")).to_be_focused()
