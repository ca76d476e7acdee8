"""The tickets board and a ticket's page in Chromium against a real `opencrab up`.

Tickets are created through the page's form or over REST; their runs (start, steps, a
question, suspend, fail) are written into the served database through the tickets
service, as the scheduler writes them. The server's own scheduler is off here
(`[tickets] enabled = false`), so the runs the tests write are the only ones (the
scheduler itself is tested in tests/tickets).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
from playwright.sync_api import Dialog, expect

from opencrab.config import load_settings
from opencrab.core.sessions import Said, insert_messages
from opencrab.event_log import EventLog
from opencrab.events import MessageEvent, MessagePayload
from opencrab.store import Database
from opencrab.tickets import service
from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

POLL = 15_000  # ms to wait for the page's polling (every 3 s) to show a change


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    """This module's `opencrab up`, its ticket scheduler off: nothing picks up a ticket."""
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


def agent(api: httpx.Client, name: str) -> dict[str, Any]:
    return make_agent(api, name, language="ja", heartbeat={"enabled": False})


def new_ticket(api: httpx.Client, agent_id: str, **body: Any) -> dict[str, Any]:
    response = api.post("/api/tickets", json={"agentId": agent_id, **body})
    assert response.status_code == 201, response.text
    return dict(response.json())


def ask(db: Database, session_id: str, agent_id: str, question: str) -> None:
    """The agent's question in its session: a message event and its message row, written
    together as the engine's recorder writes what an agent says."""
    log = EventLog(db)
    with db.write() as conn:
        event = MessageEvent(
            id=uuid4(),
            trace_id=UUID(session_id),
            parent_id=log.last_id(session_id, conn=conn),
            timestamp=datetime.now(UTC),
            content=MessagePayload(text=question),
        )
        log.append_many([event], conn=conn)
        said = Said("assistant", question, str(event.id), agent_id, None)
        insert_messages(conn, session_id, [said])


def suspended(db: Database, ticket: dict[str, Any], question: str) -> str:
    """The ticket ran, recorded two steps (one done, with a result) and asked a person;
    returns its session's id."""
    session = service.start_ticket(db, ticket["id"]).current_session_id
    assert session is not None
    service.add_step(db, ticket["id"], "差分を読む")
    service.update_step(
        db, ticket["id"], 0, status="completed", result={"files": 3, "メモ": "認証まわり"}
    )
    service.add_step(db, ticket["id"], "レビューを書く", status="running")
    ask(db, session, ticket["agentId"], question)
    service.suspend_ticket(db, ticket["id"])
    return session


def column(page: Watched, status: str) -> Any:
    return page.page.locator(f'[data-column="{status}"]')


def test_a_ticket_made_with_the_form_is_pending_on_the_board(
    page: Watched, api: httpx.Client
) -> None:
    reviewer = agent(api, "レビュー係")
    page.page.goto("/tickets")
    expect(page.page.get_by_role("link", name="Tickets", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    form = page.page.locator("form[data-new-ticket]")
    form.get_by_label("Agent").select_option(label="レビュー係")
    form.get_by_label("Goal").fill("プルリクエスト #123 をレビューする")
    form.get_by_label("Constraints").fill("セキュリティに集中する\nスタイルの警告は無視する")
    form.get_by_label("Params").fill('{"branch": "main", "pr": 123}')
    form.get_by_role("button", name="Create ticket").click()
    card = column(page, "pending").locator(".ticket-card", has_text="プルリクエスト #123")
    expect(card).to_be_visible()
    expect(card).to_contain_text("レビュー係")
    listed = api.get("/api/tickets", params={"agentId": reviewer["id"]}).json()
    assert [(t["status"], t["goal"]) for t in listed] == [
        ("pending", "プルリクエスト #123 をレビューする")
    ]
    ticket = api.get(f"/api/tickets/{listed[0]['id']}").json()
    assert ticket["context"] == {
        "goal": "プルリクエスト #123 をレビューする",
        "constraints": ["セキュリティに集中する", "スタイルの警告は無視する"],
    }
    assert ticket["params"] == {"branch": "main", "pr": 123}
    shoot(page.page, "tickets-board")


def test_params_that_are_not_a_json_object_are_refused_next_to_the_field(
    page: Watched, api: httpx.Client
) -> None:
    typist = agent(api, "入力係")
    page.page.goto("/tickets?agent=入力係")
    form = page.page.locator("form[data-new-ticket]")
    form.get_by_label("Goal").fill("壊れた JSON")
    params = form.get_by_label("Params")
    error = form.locator('[data-error-for="params"]')
    for bad, says in (('{"branch": main}', "not valid JSON"), ("[1, 2]", "must be a JSON object")):
        params.fill(bad)
        form.get_by_role("button", name="Create ticket").click()
        expect(error).to_be_visible()
        expect(error).to_contain_text(says)
        expect(params).to_have_attribute("aria-invalid", "true")
        expect(params).to_be_focused()
    assert api.get("/api/tickets", params={"agentId": typist["id"]}).json() == []
    shoot(page.page, "tickets-params-error")
    params.fill('{"ok": true}')
    expect(error).to_be_hidden()  # fixed while typing


def test_a_suspended_ticket_shows_its_question_and_an_answer_resumes_it(
    page: Watched, api: httpx.Client, store: Database
) -> None:
    asker = agent(api, "質問係")
    ticket = new_ticket(
        api,
        asker["id"],
        context={"goal": "認証モジュールの脆弱性を調べる", "constraints": ["本番には触れない"]},
        params={"repository": "example/repo"},
    )
    session = suspended(store, ticket, "どのブランチを対象にしますか？")
    page.page.goto("/tickets")
    card = column(page, "suspended").locator(".ticket-card", has_text="認証モジュール")
    expect(card).to_contain_text("1 / 2 steps")
    expect(card.locator("[data-question]")).to_have_text(  # the card says what it asks
        "Asks: どのブランチを対象にしますか？"
    )
    card.get_by_role("link").click()
    expect(page.page).to_have_url(re.compile(f"/tickets/{ticket['id']}$"))
    expect(page.page.locator("[data-ticket-status]")).to_have_text("suspended")
    expect(page.page.locator("[data-question]")).to_have_text("どのブランチを対象にしますか？")
    steps = page.page.locator(".timeline .step")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("差分を読む")
    expect(steps.nth(0).locator("[data-step-status]")).to_have_text("completed")
    expect(steps.nth(0).locator(".step-result")).to_contain_text('"メモ": "認証まわり"')
    expect(steps.nth(1).locator("[data-step-status]")).to_have_text("running")
    sessions = page.page.locator(".ticket-sessions li")
    expect(sessions).to_have_count(1)
    expect(sessions.first.get_by_role("link")).to_have_attribute("href", f"/sessions/{session}")
    expect(page.page.locator("#feed")).to_contain_text("どのブランチを対象にしますか？")
    expect(page.page.locator("[data-live-state]")).to_have_text("live")
    shoot(page.page, "tickets-ticket-suspended")

    page.page.get_by_label("Your answer").fill("main ブランチです。")
    page.page.get_by_role("button", name="Answer and resume").click()
    expect(page.page.locator("[data-ticket-status]")).to_have_text("running")
    expect(page.page.locator("[data-question]")).to_have_count(0)
    assert api.get(f"/api/tickets/{ticket['id']}").json()["status"] == "running"
    full = api.get(f"/api/sessions/{session}").json()
    assert full["status"] == "active"
    last = full["messages"][-1]
    assert (last["role"], last["content"]) == ("user", "main ブランチです。")


def test_the_page_follows_a_ticket_that_changes_elsewhere(
    page: Watched, api: httpx.Client, store: Database
) -> None:
    worker = agent(api, "作業係")
    ticket = new_ticket(api, worker["id"], context={"goal": "ログを集計する"})
    page.page.goto(f"/tickets/{ticket['id']}")
    expect(page.page.locator("[data-ticket-status]")).to_have_text("pending")
    expect(page.page.get_by_text("No session yet")).to_be_visible()
    session = service.start_ticket(store, ticket["id"]).current_session_id
    service.add_step(store, ticket["id"], "ログを読む")
    expect(page.page.locator("[data-ticket-status]")).to_have_text("running", timeout=POLL)
    expect(page.page.locator(".timeline .step")).to_have_count(1)
    expect(page.page.locator("[data-new-session]")).to_be_visible()  # the feed had none
    assert session is not None
    ask(store, session, worker["id"], "続けてよいですか？")
    service.suspend_ticket(store, ticket["id"])
    expect(page.page.locator("[data-question]")).to_have_text("続けてよいですか？", timeout=POLL)
    expect(page.page.get_by_label("Your answer")).to_be_visible()
    service.fail_ticket(store, ticket["id"], "ディスクがいっぱいです")
    expect(page.page.locator("[data-ticket-error]")).to_have_text(
        "ディスクがいっぱいです", timeout=POLL
    )
    expect(page.page.locator("[data-question]")).to_have_count(0)
    failed = api.get(f"/api/tickets/{ticket['id']}").json()
    assert (failed["status"], failed["errorMessage"]) == ("failed", "ディスクがいっぱいです")
    page.page.goto(f"/tickets/{ticket['id']}")
    shoot(page.page, "tickets-ticket-failed")


def test_reset_then_delete(page: Watched, api: httpx.Client, store: Database) -> None:
    resetter = agent(api, "やり直し係")
    ticket = new_ticket(api, resetter["id"], context={"goal": "もう一度やる"})
    session = suspended(store, ticket, "本当に？")
    page.page.goto(f"/tickets/{ticket['id']}")
    page.page.get_by_role("button", name="Reset").click()
    expect(page.page.locator("[data-ticket-status]")).to_have_text("pending")
    archived = page.page.locator(f'.ticket-sessions li[data-session-id="{session}"]')
    expect(archived).to_contain_text("archived")
    expect(archived).to_contain_text("completed")
    expect(page.page.locator(".timeline .step")).to_have_count(2)  # the steps are kept
    body = api.get(f"/api/tickets/{ticket['id']}").json()
    assert (body["status"], body["currentSessionId"], len(body["steps"])) == ("pending", None, 2)

    asked: list[str] = []

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.page.on("dialog", accept)
    page.page.get_by_role("button", name="Delete").click()
    expect(page.page).to_have_url(re.compile(r"/tickets$"))
    assert asked == ["Delete this ticket with its steps, sessions and messages?"]
    assert api.get(f"/api/tickets/{ticket['id']}").status_code == 404
    expect(page.page.locator(f'[data-ticket-id="{ticket["id"]}"]')).to_have_count(0)


def test_the_board_filters_by_agent(page: Watched, api: httpx.Client) -> None:
    first = agent(api, "甲")
    second = agent(api, "乙")
    mine = new_ticket(api, first["id"], context={"goal": "甲の仕事"})
    theirs = new_ticket(api, second["id"], context={"goal": "乙の仕事"})
    page.page.goto("/tickets")
    expect(page.page.locator(f'[data-ticket-id="{mine["id"]}"]')).to_be_visible()
    expect(page.page.locator(f'[data-ticket-id="{theirs["id"]}"]')).to_be_visible()
    page.page.get_by_role("search").get_by_label("Agent").select_option("甲")
    page.page.get_by_role("button", name="Filter").click()
    expect(page.page).to_have_url(re.compile(r"/tickets\?agent=%E7%94%B2$"))
    expect(page.page.locator(f'[data-ticket-id="{mine["id"]}"]')).to_be_visible()
    expect(page.page.locator(f'[data-ticket-id="{theirs["id"]}"]')).to_have_count(0)
    expect(page.page.locator("form[data-new-ticket]").get_by_label("Agent")).to_have_value(
        first["id"]
    )  # a new ticket is for the agent shown
    page.page.goto("/tickets?agent=nobody-at-all")
    expect(page.page.get_by_role("alert")).to_contain_text("There is no agent named")
    expect(page.page.locator(".ticket-card")).to_have_count(0)
