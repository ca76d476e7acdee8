"""Tickets end to end (issue 20): the scheduler runs them through the turn service with a
scripted model, and everything is watched over the REST API, as a user would.

One ticket records two steps, asks a person, is answered over REST and completes;
another is reset while it waits and runs again in a new session with its old steps
kept; another fails with its `errorMessage` — on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from opencrab.llm.types import ChatRequest
from tests.fakes.scripted_provider import ScriptedProvider
from tests.tickets.conftest import calls, wait_for

END = "(the script ran out)"


def ticket(api: TestClient, ticket_id: str) -> dict[str, Any]:
    response = api.get(f"/api/tickets/{ticket_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def settled(api: TestClient, ticket_id: str, status: str) -> dict[str, Any]:
    """The ticket once it reached `status` (waiting for the scheduler)."""
    return dict(
        wait_for(
            f"ticket {ticket_id} to be {status}",
            lambda: (t := ticket(api, ticket_id))["status"] == status and t,
        )
    )


def create(api: TestClient, agent: dict[str, Any], **body: Any) -> str:
    response = api.post("/api/tickets", json={"agentId": agent["id"], **body})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def session(api: TestClient, session_id: str) -> dict[str, Any]:
    response = api.get(f"/api/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def said_to_model(request: ChatRequest) -> list[str]:
    """The user and tool messages of a request to the model, in order."""
    return [str(m.content) for m in request.messages if m.role in ("user", "tool")]


def test_a_ticket_records_steps_asks_a_person_is_answered_and_completes(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then(
        calls(
            ("add_step", {"title": "Read the diff"}), ("add_step", {"title": "Write the review"})
        ),
        calls(
            ("update_step", {"index": 0, "status": "completed", "result": {"files": 3}}),
            ("ask_human", {"question": "Should I review the tests too?"}),
        ),
        calls(
            ("update_step", {"index": 1, "status": "completed", "result": {"comments": 2}}),
            ("complete_ticket", {"summary": "Reviewed: two comments.", "result": {"ok": True}}),
        ),
        END,
    )
    ticket_id = create(
        api, agent, context={"goal": "Review PR 7", "constraints": ["be kind"]}, params={"pr": 7}
    )
    waiting = settled(api, ticket_id, "suspended")
    task = said_to_model(scripted.requests[0])[0]
    assert "Review PR 7" in task
    assert "be kind" in task
    assert '"pr": 7' in task
    assert [(s["index"], s["title"], s["status"], s["result"]) for s in waiting["steps"]] == [
        (0, "Read the diff", "completed", {"files": 3}),
        (1, "Write the review", "pending", None),
    ]
    current = waiting["currentSessionId"]
    asked = session(api, current)
    assert asked["status"] == "suspended"
    assert asked["messages"][-1]["role"] == "assistant"
    assert asked["messages"][-1]["content"] == "Should I review the tests too?"
    assert len(scripted.requests) == 2  # nothing runs while it waits

    answer = api.post(f"/api/sessions/{current}/messages", json={"content": "Yes, the tests too."})
    assert answer.status_code == 201, answer.text
    done = settled(api, ticket_id, "completed")
    assert done["currentSessionId"] == current  # the same session, resumed
    assert [s["status"] for s in done["steps"]] == ["completed", "completed"]
    assert done["steps"][1]["result"] == {"comments": 2}
    assert done["errorMessage"] is None
    assert "Yes, the tests too." in said_to_model(scripted.requests[2])  # in its history
    ended = session(api, current)
    assert ended["status"] == "completed"
    assert ended["messages"][-1]["content"].startswith("Reviewed: two comments.")
    assert len(scripted.requests) == 3


def test_a_reset_ticket_runs_again_in_a_new_session_keeping_its_steps(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then(
        calls(
            ("add_step", {"title": "Draft the notes"}), ("ask_human", {"question": "Which tag?"})
        ),
        calls(("add_step", {"title": "Draft again"}), ("complete_ticket", {"summary": "Done."})),
        END,
    )
    ticket_id = create(api, agent, context={"goal": "Release notes"})
    first = settled(api, ticket_id, "suspended")["currentSessionId"]
    assert api.patch(f"/api/tickets/{ticket_id}/reset").status_code == 200
    done = settled(api, ticket_id, "completed")
    second = done["currentSessionId"]
    assert second != first
    assert [s["title"] for s in done["steps"]] == ["Draft the notes", "Draft again"]
    assert session(api, first)["status"] == "completed"  # archived by the reset
    assert session(api, second)["status"] == "completed"
    listed = api.get("/api/sessions", params={"ticketId": ticket_id}).json()
    assert {s["id"] for s in listed} == {first, second}
    retold = said_to_model(scripted.requests[1])
    assert "Which tag?" not in " ".join(retold)  # a new session: a fresh history …
    assert "Draft the notes" in retold[0]  # … told of the steps it keeps


def test_a_ticket_fails_with_its_error_message(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then(calls(("fail_ticket", {"reason": "The repository is archived."})), END)
    ticket_id = create(api, agent, context={"goal": "Fix the build"})
    failed = settled(api, ticket_id, "failed")
    assert failed["errorMessage"] == "The repository is archived."
    assert session(api, failed["currentSessionId"])["status"] == "failed"
