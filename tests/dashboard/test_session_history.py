"""A long session: pages of earlier events, a burst of live events, and reading without
JavaScript. Events are written into the served database as another process would (the
CLI, a second server): the live view learns of them from the event feed's polling."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
from playwright.sync_api import Browser, expect

from opencrab.config import load_settings
from opencrab.event_log import EventLog
from opencrab.events import AgentEvent, MessageEvent, MessagePayload, UserEvent, UserPayload
from opencrab.store import Database
from tests.dashboard.conftest import DEFAULT_REPLY, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

WINDOW = 300  # the events a live view shows at first (dashboard/pages/session_view.py)
MAX_ROWS = 1000  # the rows it keeps while events arrive (static/js/live.js)


@pytest.fixture
def store(served: ServedOpenCrab) -> Iterator[Database]:
    """The served server's own database."""
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    yield db
    db.close()


def write_pairs(db: Database, session_id: str, pairs: int, start: int = 0) -> None:
    """`pairs` user messages and replies into the chat's trace, 50 events a transaction."""
    log = EventLog(db)
    parent = log.last_id(session_id)
    batch: list[AgentEvent] = []
    for n in range(start, start + pairs):
        asked = UserEvent(
            id=uuid4(),
            trace_id=UUID(session_id),
            parent_id=parent,
            timestamp=datetime.now(UTC),
            content=UserPayload(text=f"質問 {n}"),
            metadata={"source": "cli", "sender": "user"},
        )
        said = MessageEvent(
            id=uuid4(),
            trace_id=UUID(session_id),
            parent_id=asked.id,
            timestamp=datetime.now(UTC),
            content=MessagePayload(text=f"答え {n}"),
        )
        batch += [asked, said]
        parent = said.id
        if len(batch) >= 50:
            log.append_many(batch)
            batch = []
    if batch:
        log.append_many(batch)


def new_session(api: httpx.Client, name: str) -> str:
    agent = make_agent(api, name, language="ja", heartbeat={"enabled": False})
    return str(api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"])


def test_earlier_events_are_a_page_back_and_a_burst_is_drawn_whole(
    page: Watched, api: httpx.Client, store: Database
) -> None:
    session_id = new_session(api, "ナギ")
    write_pairs(store, session_id, 200)  # 400 events
    p = page.page
    p.goto(f"/sessions/{session_id}")
    feed = p.locator("#feed")
    expect(feed.locator("> li")).to_have_count(WINDOW)
    expect(feed.locator("> li").first).to_contain_text("質問 50")
    expect(p.locator("[data-live-state]")).to_have_text("live")

    p.get_by_role("link", name="Show earlier events").click()
    expect(p).to_have_url(re.compile(r"\?before=\d+$"))
    expect(feed.locator("> li")).to_have_count(400 - WINDOW)
    expect(feed.locator("> li").last).to_contain_text("答え 49")
    expect(p.locator("[data-live-state]")).to_have_text("not live: earlier events")
    expect(p.get_by_role("button", name="Pause live updates")).to_have_count(0)
    p.get_by_role("link", name="Back to the newest events (live)").click()
    expect(p.locator("[data-live-state]")).to_have_text("live")

    write_pairs(store, session_id, 750, start=200)  # 1,500 events while the page follows
    events = api.get(
        f"/api/sessions/{session_id}/events", params={"newest": "true", "limit": 1}
    ).json()
    expect(feed).to_have_attribute("data-last-seq", str(events[-1]["seq"]), timeout=30_000)
    expect(feed).to_have_attribute("data-event-count", str(WINDOW + 1500))
    rows = feed.locator("> li")
    expect(rows).to_have_count(MAX_ROWS)
    expect(rows.last).to_contain_text("答え 949")
    expect(rows.first).to_contain_text("質問 450")
    first_seq = rows.first.get_attribute("data-seq")
    expect(p.get_by_role("link", name="Show earlier events")).to_have_attribute(
        "href", f"/sessions/{session_id}?before={first_seq}"
    )
    seqs: list[str] = rows.evaluate_all("els => els.map(el => el.dataset.seq)")
    assert len(set(seqs)) == MAX_ROWS
    assert [int(s) for s in seqs] == sorted(int(s) for s in seqs)


def test_pages_read_without_javascript(
    browser: Browser, served: ServedOpenCrab, api: httpx.Client, llm: FakeLlmServer
) -> None:
    session_id = new_session(api, "シズク")
    for n in range(3):
        said = api.post(f"/api/sessions/{session_id}/messages", json={"content": f"質問 {n}"})
        assert said.status_code == 201, said.text
    context = browser.new_context(base_url=served.url, java_script_enabled=False)
    served.sign_in(context)
    watched = Watched(context.new_page(), served.url)
    p = watched.page
    try:
        p.goto("/sessions")
        p.get_by_label("Title contains").fill("質問 0")
        p.get_by_role("button", name="Filter").click()
        expect(p.locator("tbody tr")).to_have_count(1)
        p.get_by_role("link", name="質問 0").click()
        expect(p.get_by_role("heading", name="Chat with シズク")).to_be_visible()
        expect(p.locator("#feed > li")).to_have_count(6)
        expect(p.locator("#feed > li.ev-user").last).to_contain_text("質問 2")
        expect(p.locator("#feed > li.ev-speech").last).to_contain_text(DEFAULT_REPLY)
        expect(p.get_by_role("button", name="Pause live updates")).to_be_hidden()
        expect(p.get_by_role("button", name="Send")).to_be_hidden()  # it needs the script
        expect(p.get_by_text("Sending a message needs JavaScript.")).to_be_visible()
        shoot(p, "session-no-js")
        watched.check()
    finally:
        context.close()


def test_bad_list_parameters_are_refused_with_a_page(api: httpx.Client) -> None:
    bad: dict[str, Any] = {"kind": "meeting"}
    response = api.get("/sessions", params=bad)
    assert response.status_code == 400
    assert "text/html" in response.headers["content-type"]
    assert "kind" in response.text
    assert api.get("/sessions", params={"page": "0"}).status_code == 400
    assert api.get("/sessions", params={"agent": "nobody"}).status_code == 404
    redirect = api.get("/discussions/2b5f8c1e-0000-4000-8000-000000000000")
    assert redirect.status_code == 307
    assert redirect.headers["location"] == "/sessions/2b5f8c1e-0000-4000-8000-000000000000"
