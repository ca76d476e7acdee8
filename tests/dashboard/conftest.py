"""Fixtures for the dashboard: a real `opencrab up`, Debian's Chromium, watched pages.

Each test module gets its own server (`served`, a fresh data directory) thinking
through the session's fake OpenAI server, and its own browser. `page` is a fresh
browser context (1280x900, Tokyo time, light theme), signed in with the server's token,
whose problems fail the test (tests/fakes/browser.py); `api` is an httpx client on the
same server, sending the token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.fakes.browser import Watched, launch
from tests.fakes.corpora import FIXTURES
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.fakes.served import ServedOpenCrab

CHAT = "/v1/chat/completions"
DEFAULT_REPLY = "Hello from the fake model."


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    # imports read the tests' own folders and the corpus, never ~/.codex or ~/.claude
    roots = json.dumps([str(tmp_path_factory.getbasetemp()), str(FIXTURES)])
    with ServedOpenCrab(
        tmp_path_factory.mktemp("served") / "data",
        llm=_llm_server_session,
        env={"OPENCRAB_IMPORTS__ROOTS": roots},
    ) as server:
        yield server


@pytest.fixture
def llm(fake_llm_server: FakeLlmServer) -> FakeLlmServer:
    """The fake model, answering DEFAULT_REPLY unless a test queues something else."""
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": DEFAULT_REPLY})))
    return fake_llm_server


@pytest.fixture
def api(served: ServedOpenCrab) -> Iterator[httpx.Client]:
    with served.client(timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser, served: ServedOpenCrab) -> Iterator[Watched]:
    context = browser.new_context(
        base_url=served.url,
        viewport={"width": 1280, "height": 900},
        timezone_id="Asia/Tokyo",
        locale="en-US",
        color_scheme="light",
        accept_downloads=True,
    )
    served.sign_in(context)
    watched = Watched(context.new_page(), served.url)
    try:
        yield watched
        watched.check()
    finally:
        context.close()


def make_agent(api: httpx.Client, name: str, **fields: Any) -> dict[str, Any]:
    """An agent created over REST (the same call the dashboard's form makes)."""
    body = {"name": name, "prompt": fields.pop("prompt", "You help."), **fields}
    response = api.post("/api/agents", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


QUIET = {"enabled": False}  # no heartbeat reflection spends or answers behind the test's back
BIG_USAGE = {"prompt_tokens": 100_000, "completion_tokens": 10_000, "total_tokens": 110_000}
"""gpt-5.2 (the default tool_calling model) at $1.75 / $14.00 per million tokens: $0.315."""


def chat_once(api: httpx.Client, agent: str, text: str) -> dict[str, Any]:
    """One turn in a new session of `agent` over REST; the turn's JSON."""
    session = api.post("/api/sessions", json={"agentId": agent}).json()["id"]
    posted = api.post(f"/api/sessions/{session}/messages", json={"content": text})
    assert posted.status_code == 201, posted.text
    result: dict[str, Any] = posted.json()
    return result
