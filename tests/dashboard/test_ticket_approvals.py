"""A ticket's pending approvals in Chromium: a held write_file call shown with its
arguments, approved from the page (it runs; the ticket resumes), and one denied."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from opencrab.config import load_settings
from opencrab.core.tools import tool_id
from opencrab.store import Database
from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.inbox_items import hold_in
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    """A server whose ticket scheduler is off: the tests start and hold their tickets
    themselves (a ticket made over REST wakes a running scheduler at once)."""
    with ServedOpenCrab(
        tmp_path_factory.mktemp("served") / "data",
        llm=_llm_server_session,
        env={"OPENCRAB_TICKETS__ENABLED": "false"},
    ) as server:
        yield server


@pytest.fixture
def store(served: ServedOpenCrab) -> Iterator[Database]:
    """The served server's own database."""
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    yield db
    db.close()


def held(
    db: Database, api: httpx.Client, name: str, arguments: dict[str, str]
) -> tuple[str, str, str]:
    """A running ticket whose turn held a write_file call, written as the engine writes it
    (the call event, the pending approval, the ticket suspended by the approval hook);
    returns (ticket id, session id, approval id)."""
    agent = make_agent(
        api, name, language="ja", heartbeat={"enabled": False}, toolIds=[tool_id("write_file")]
    )
    made = api.post("/api/tickets", json={"agentId": agent["id"], "context": {"goal": "書く"}})
    ticket = made.json()["id"]
    session, approval_id = hold_in(db, ticket, agent["id"], arguments)
    assert api.get(f"/api/tickets/{ticket}").json()["status"] == "suspended"
    return ticket, session, approval_id


def test_a_held_call_is_approved_from_the_ticket_page(
    page: Watched, api: httpx.Client, store: Database, served: ServedOpenCrab
) -> None:
    ticket, session, approval = held(
        store, api, "書き係", {"path": "メモ.txt", "content": "こんにちは"}
    )
    page.page.goto(f"/tickets/{ticket}")
    panel = page.page.locator("[data-approvals]")
    expect(panel.locator("[data-approval-tool]")).to_have_text("write_file")
    expect(panel.locator("[data-approval-arguments]")).to_contain_text('"path": "メモ.txt"')
    expect(page.page.locator("[data-question-none]")).to_have_count(0)
    shoot(page.page, "tickets-ticket-approval")

    panel.get_by_role("button", name="Approve and run").click()
    expect(page.page.locator("[data-ticket-status]")).to_have_text("running")
    expect(page.page.locator("[data-approvals]")).to_have_count(0)
    decided = api.get(f"/api/approvals/{approval}").json()
    assert decided["status"] == "approved"
    assert api.get(f"/api/sessions/{session}").json()["status"] == "active"
    written = list(served.data_dir.glob("agents/*/workspace/メモ.txt"))
    assert [p.read_text() for p in written] == ["こんにちは"]


def test_a_held_call_is_denied_with_a_reason(
    page: Watched, api: httpx.Client, store: Database, served: ServedOpenCrab
) -> None:
    ticket, _, approval = held(store, api, "断られ係", {"path": "x.txt", "content": "x"})
    page.page.goto(f"/tickets/{ticket}")
    page.page.get_by_label("Reason for a denial (optional)").fill("今は不要です")
    page.page.get_by_role("button", name="Deny").click()
    expect(page.page.locator("[data-ticket-status]")).to_have_text("running")
    decided = api.get(f"/api/approvals/{approval}").json()
    assert (decided["status"], decided["reason"]) == ("denied", "今は不要です")
    assert not list(served.data_dir.glob("agents/*/workspace/x.txt"))
