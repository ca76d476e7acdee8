"""`/api/inbox` on SQLite and PostgreSQL: a held call, a ticket's question, a budget alert
and a spend alarm listed newest first with what to answer, narrowed by agent and kind,
each answered or dismissed with the service calls the other pages use, and the errors."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.config.models import SpendAlarms
from opencrab.core.tools import tool_id
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.core.conftest import calls, speak
from tests.fakes.inbox_items import ask, spend_row
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

QUESTION = "どのブランチにマージしますか? main or release?"


@pytest.fixture
def api(settings: Settings, any_db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    from opencrab.server.app import create_app

    recorder = MetricsRecorder(any_db)
    router = LlmRouter(settings, metrics=recorder)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, any_db, router=router)) as client:
        yield client


def runtime_of(api: TestClient) -> Any:
    return api.app.state.runtime  # type: ignore[attr-defined]


def inbox(api: TestClient, **params: Any) -> dict[str, Any]:
    response = api.get("/api/inbox", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def held(api: TestClient, scripted: ScriptedProvider, name: str) -> dict[str, Any]:
    """A chat turn of a new agent whose write_file call waits for a person."""
    agent = new_agent(api, name, toolIds=[tool_id("write_file")])
    put = api.put(
        f"/api/agents/{agent['id']}/tool-settings", json={"approvals": {"write_file": "always"}}
    )
    assert put.status_code == 200, put.text
    session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    scripted.then(calls(("write_file", {"path": "a.txt", "content": "x"})), speak("ok"))
    turn = api.post(f"/api/sessions/{session}/messages", json={"content": "go"}).json()["turn"]
    assert turn["stoppedBy"] == "approval"
    return {"agent": agent, "approval": turn["approvalId"], "session": session}


def test_held_calls_and_questions_are_listed_filtered_and_answered(
    api: TestClient, scripted: ScriptedProvider
) -> None:
    assert inbox(api) == {
        "items": [],
        "count": 0,
        "counts": dict.fromkeys(
            [
                "approval",
                "ticket_question",
                "agent_mode_question",
                "budget_alert",
                "spend_alarm",
                "schedule_failure",
            ],
            0,
        ),
        "notifications": {"enabled": False, "outlets": [], "lastFailure": None},
    }
    call = held(api, scripted, "aki")
    mina = new_agent(api, "mina")
    ticket_id, session_id = ask(runtime_of(api).db, mina["id"], QUESTION)

    view = inbox(api)
    assert view["count"] == 2
    question, approval = view["items"]  # newest first: the question came last
    assert question == {
        "id": f"ticket_question:{ticket_id}",
        "kind": "ticket_question",
        "agentId": mina["id"],
        "agent": "mina",
        "createdAt": question["createdAt"],
        "summary": QUESTION,
        "subjectId": session_id,
        "link": f"/tickets/{ticket_id}",
        "detail": QUESTION,
        "sessionId": session_id,
        "ticketId": ticket_id,
        "taskId": None,
        "toolName": None,
    }
    assert approval["id"] == f"approval:{call['approval']}"
    assert (approval["kind"], approval["agent"], approval["subjectId"]) == (
        "approval",
        "aki",
        call["approval"],
    )
    assert approval["summary"] == 'Wants to run write_file {"path": "a.txt", "content": "x"}'
    assert approval["link"] == f"/sessions/{call['session']}"
    assert approval["toolName"] == "write_file"
    assert datetime.fromisoformat(question["createdAt"]) >= datetime.fromisoformat(
        approval["createdAt"]
    )
    assert view["counts"]["approval"] == 1
    assert view["counts"]["ticket_question"] == 1

    assert [i["kind"] for i in inbox(api, agent="aki")["items"]] == ["approval"]
    assert [i["kind"] for i in inbox(api, agent=mina["id"])["items"]] == ["ticket_question"]
    assert [i["agent"] for i in inbox(api, kind="ticket_question")["items"]] == ["mina"]
    both = api.get("/api/inbox?kind=approval&kind=ticket_question&limit=1").json()
    assert (both["count"], len(both["items"])) == (2, 1)
    assert api.get("/api/inbox/count").json() == {"count": 2}

    # answered with the calls the ticket's and the session's pages use
    answered = api.post(f"/api/sessions/{session_id}/messages", json={"content": "main"})
    assert answered.status_code in (200, 201, 202), answered.text
    assert api.get(f"/api/tickets/{ticket_id}").json()["status"] != "suspended"
    scripted.then(speak("written"))
    decided = api.post(f"/api/approvals/{call['approval']}/approve")
    assert decided.status_code == 200, decided.text
    assert inbox(api)["items"] == []
    assert api.get("/api/inbox/count").json() == {"count": 0}


def test_bad_filters_are_refused_by_name(api: TestClient) -> None:
    message = error_of(api.get("/api/inbox", params={"kind": "memo"}), 400, "validation_error")
    assert "kind" in message
    assert "'memo'" in message
    assert "approval" in message
    assert "ghost" in error_of(api.get("/api/inbox", params={"agent": "ghost"}), 404, "not_found")
    error_of(api.get("/api/inbox", params={"limit": 0}), 400, "validation_error")
    error_of(api.get("/api/inbox", params={"agent": "x" * 500}), 400, "validation_error")


def test_budget_alerts_and_spend_alarms_are_dismissed(
    api: TestClient, scripted: ScriptedProvider, settings: Settings
) -> None:
    aki = new_agent(api, "aki")
    put = api.put(f"/api/agents/{aki['id']}/budget", json={"dailyUsd": 0.3})
    assert put.status_code == 200, put.text
    scripted.then(reply("Noted.", cost_usd=0.25))  # 83 % of the day's cap
    session = api.post("/api/sessions", json={"agentId": aki["id"]}).json()["id"]
    api.post(f"/api/sessions/{session}/messages", json={"content": "Hi"})
    assert api.get("/api/budgets").status_code == 200  # reading records the alert
    [alert] = inbox(api, kind="budget_alert")["items"]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert alert["id"] == f"budget_alert:{aki['id']}:daily:{today}:80"
    assert alert["summary"].startswith("Budget alert: agent aki reached 80% of its daily budget")
    assert (alert["agent"], alert["link"]) == ("aki", "/budgets")

    # an agent spending on its own, nobody talking to it: a spend alarm
    ren = new_agent(api, "ren")
    runtime = runtime_of(api)
    with runtime.db.write() as conn:
        metrics_repo.insert(conn, [spend_row(ren["id"], datetime.now(UTC), 0.9, "heartbeat")])
    settings.budgets.alarms = SpendAlarms(min_usd=0.5)
    [alarm] = inbox(api, kind="spend_alarm")["items"]
    assert alarm["id"] == f"spend_alarm:unattended:{ren['id']}:{today}"
    assert alarm["summary"].startswith("Spend alarm (unattended) for agent ren: $0.90 spent")
    burn = {b["name"]: b for b in api.get("/api/budgets").json()["slowBurn"]}
    assert burn["ren"]["unattendedTodayUsd"] == pytest.approx(0.9)
    assert [a["id"] for a in burn["ren"]["alarms"]] == [alarm["id"]]
    assert burn["aki"]["personQuiet"] is False  # it chatted

    # only alerts and alarms are dismissed; the rest is answered where it lives
    ticket_id, _ = ask(runtime.db, ren["id"], "May I?")
    message = error_of(
        api.post(f"/api/inbox/ticket_question:{ticket_id}/dismiss"), 400, "validation_error"
    )
    assert "answered or decided" in message
    for item in (alert, alarm):
        done = api.post(f"/api/inbox/{item['id']}/dismiss")
        assert done.status_code == 200, done.text
        assert done.json()["id"] == item["id"]
        error_of(api.post(f"/api/inbox/{item['id']}/dismiss"), 404, "not_found")
    assert [i["kind"] for i in inbox(api)["items"]] == ["ticket_question"]
    error_of(api.post("/api/inbox/budget_alert:nope/dismiss"), 404, "not_found")
    # dismissed is not deleted: the budgets page still lists the alert
    assert len(api.get("/api/budgets").json()["alerts"]) == 1


def test_the_webhook_secret_is_stored_encrypted_and_never_shown(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert api.get("/api/inbox/webhook-secret").json() == {"source": None}
    short = api.put("/api/inbox/webhook-secret", json={"secret": "short"})
    assert "secret" in error_of(short, 400, "validation_error")
    secret = "s3cret-s3cret-s3cret"
    saved = api.put("/api/inbox/webhook-secret", json={"secret": secret})
    assert saved.json() == {"source": "stored"}
    from opencrab.inbox.secret import webhook_secret

    runtime = runtime_of(api)
    assert webhook_secret(runtime) == secret
    with runtime.db.read() as conn:
        stored = conn.exec_driver_sql("SELECT value_encrypted FROM inbox_secrets").scalar()
    assert secret not in stored
    monkeypatch.setenv("OPENCRAB_INBOX_WEBHOOK_SECRET", "from-the-environment")
    assert api.get("/api/inbox/webhook-secret").json() == {"source": "environment"}
    assert webhook_secret(runtime) == "from-the-environment"
    assert api.put("/api/inbox/webhook-secret", json={"secret": None}).status_code == 200
    monkeypatch.delenv("OPENCRAB_INBOX_WEBHOOK_SECRET")
    assert api.get("/api/inbox/webhook-secret").json() == {"source": None}


def test_the_websocket_tells_the_count_and_each_change(api: TestClient) -> None:
    aki = new_agent(api, "aki")
    runtime = runtime_of(api)
    with api.websocket_connect("/api/ws") as conn:
        conn.send_json({"type": "inbox.subscribe"})
        assert conn.receive_json() == {"type": "inbox", "count": 0}
        ticket_id, session_id = ask(runtime.db, aki["id"], "Ready?")  # as another process
        assert conn.receive_json() == {"type": "inbox", "count": 1}
        api.post(f"/api/sessions/{session_id}/messages", json={"content": "yes"})
        assert conn.receive_json() == {"type": "inbox", "count": 0}
        conn.send_json({"type": "inbox.unsubscribe"})
        assert conn.receive_json() == {"type": "inbox.unsubscribed"}
        conn.send_json({"type": "inbox.subscribe", "agent": "aki"})
        error = conn.receive_json()
        assert (error["type"], error["error"]) == ("error", "validation_error")
        assert "agent" in error["message"]
        assert ticket_id
