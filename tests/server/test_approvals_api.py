"""`/api/approvals` over REST: a held call listed, approved or denied, the errors, and a
ticket that suspends on a held call and resumes when it is decided."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from opencrab.core.tools import tool_id
from opencrab.messages import IncomingMessage, InternalSource
from opencrab.tickets import service as tickets
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.conftest import error_of, new_agent

WRITE = {"path": "out.txt", "content": "made"}


def _held(client: TestClient, scripted: ScriptedProvider, policy: str = "always") -> dict[str, Any]:
    """A chat turn whose write_file call waits for a person; its TurnOutcome."""
    agent = new_agent(client, toolIds=[tool_id("write_file")])
    url = f"/api/agents/{agent['id']}/tool-settings"
    put = client.put(url, json={"approvals": {"write_file": policy}})
    assert put.status_code == 200, put.text
    assert put.json()["approvals"] == {"write_file": policy}
    session_id = client.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    scripted.then(calls(("write_file", WRITE)), speak("ok"))
    posted = client.post(f"/api/sessions/{session_id}/messages", json={"content": "go"})
    turn: dict[str, Any] = posted.json()["turn"]
    assert turn["stoppedBy"] == "approval"
    return turn


def test_a_held_call_is_listed_and_approved_once(
    client: TestClient, scripted: ScriptedProvider, data_dir: Path
) -> None:
    turn = _held(client, scripted)
    listed = client.get(
        "/api/approvals", params={"sessionId": turn["sessionId"], "status": "pending"}
    ).json()
    assert [a["id"] for a in listed] == [turn["approvalId"]]
    assert (listed[0]["toolName"], listed[0]["arguments"]) == ("write_file", WRITE)
    assert listed[0]["status"] == "pending"
    assert not list(data_dir.glob("agents/*/workspace/out.txt"))

    approved = client.post(f"/api/approvals/{turn['approvalId']}/approve")
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert (body["status"], body["decidedBy"]) == ("approved", "local")  # loopback, no token
    assert body["resultEventId"]
    assert [p.read_text() for p in data_dir.glob("agents/*/workspace/out.txt")] == ["made"]

    again = client.post(f"/api/approvals/{turn['approvalId']}/deny", json={"reason": "late"})
    assert "approved already" in error_of(again, 409, "already_decided")
    assert client.get(f"/api/approvals/{turn['approvalId']}").json()["status"] == "approved"
    pending = {"sessionId": turn["sessionId"], "status": "pending"}
    assert client.get("/api/approvals", params=pending).json() == []


def test_a_denial_keeps_its_reason_and_runs_nothing(
    client: TestClient, scripted: ScriptedProvider, data_dir: Path
) -> None:
    turn = _held(client, scripted, policy="unsafe")
    denied = client.post(
        f"/api/approvals/{turn['approvalId']}/deny",
        json={"reason": "not here", "decidedBy": "ops"},
    )
    assert denied.status_code == 200, denied.text
    assert (denied.json()["status"], denied.json()["reason"]) == ("denied", "not here")
    assert denied.json()["decidedBy"] == "local"  # never the body's name
    assert not list(data_dir.glob("agents/*/workspace/out.txt"))


def test_approval_errors(client: TestClient, scripted: ScriptedProvider) -> None:
    missing = "6f0c1d2e-0000-4000-8000-0000000000ff"
    error_of(client.get(f"/api/approvals/{missing}"), 404, "not_found")
    error_of(client.post(f"/api/approvals/{missing}/approve"), 404, "not_found")
    error_of(client.post("/api/approvals/nope/approve"), 400, "validation_error")
    error_of(client.get("/api/approvals", params={"status": "maybe"}), 400, "validation_error")
    turn = _held(client, scripted)
    url = f"/api/approvals/{turn['approvalId']}/deny"
    error_of(client.post(url, json={"verdict": "no"}), 400, "validation_error")
    assert client.get(f"/api/approvals/{turn['approvalId']}").json()["status"] == "pending"
    agent_url = f"/api/agents/{turn['sessionId']}/tool-settings"
    error_of(client.put(agent_url, json={}), 404, "not_found")


def test_tool_settings_refuse_a_bad_policy(client: TestClient) -> None:
    agent = new_agent(client)
    url = f"/api/agents/{agent['id']}/tool-settings"
    client.put(url, json={"approvals": {"write_file": "always"}})
    message = error_of(
        client.put(url, json={"approvals": {"write_file": "sometimes"}}), 400, "validation_error"
    )
    assert "sometimes" in message or "approvals" in message
    error_of(client.put(url, json={"approvals": {"bad name!": "always"}}), 400, "validation_error")
    assert client.get(url).json()["approvals"] == {"write_file": "always"}  # nothing lost


def test_a_ticket_suspends_on_a_held_call_and_resumes_when_it_is_decided(
    client: TestClient, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = new_agent(client, toolIds=[tool_id("write_file")])
    client.put(
        f"/api/agents/{agent['id']}/tool-settings", json={"approvals": {"write_file": "always"}}
    )
    runtime: Any = client.app.state.runtime  # type: ignore[attr-defined]
    ticket = tickets.create_ticket(runtime.db, agent["id"], context={"goal": "write"})
    running = tickets.start_ticket(runtime.db, ticket.id)
    session_id = running.current_session_id
    assert session_id is not None
    scripted.then(calls(("write_file", WRITE)), speak("done"))
    message = IncomingMessage.text("goal: write", source=InternalSource(origin="ticket"))
    agent_obj = runtime.agents.get(agent["id"])

    async def turn() -> Any:
        return await runtime.engine.process(agent_obj, message, session_id=session_id)

    result = client.portal.call(turn)  # type: ignore[attr-defined]
    assert result.stopped_by == "approval"
    shown = client.get(f"/api/tickets/{ticket.id}").json()
    assert shown["status"] == "suspended"
    [session] = client.get("/api/sessions", params={"ticketId": ticket.id}).json()
    assert session["status"] == "suspended"

    approved = client.post(f"/api/approvals/{result.approval_id}/approve")
    assert approved.status_code == 200, approved.text
    resumed = client.get(f"/api/tickets/{ticket.id}").json()
    assert (resumed["status"], resumed["currentSessionId"]) == ("running", session_id)
    [session] = client.get("/api/sessions", params={"ticketId": ticket.id}).json()
    assert session["status"] == "active"
    assert [p.read_text() for p in data_dir.glob("agents/*/workspace/out.txt")] == ["made"]


COMMAND = {"command": "echo made"}


def _held_command(client: TestClient, scripted: ScriptedProvider) -> tuple[str, dict[str, Any]]:
    """A chat turn over REST whose execute_command call waits (policy "always"), then a
    final answer queued for the turn that continues; (session id, the TurnOutcome)."""
    agent = new_agent(client, toolIds=[tool_id("execute_command")])
    settings = {"executeCommand": True, "approvals": {"execute_command": "always"}}
    put = client.put(f"/api/agents/{agent['id']}/tool-settings", json=settings)
    assert put.status_code == 200, put.text
    session_id = client.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    scripted.then(calls(("execute_command", COMMAND)), reply("The command printed made."))
    posted = client.post(f"/api/sessions/{session_id}/messages", json={"content": "run it"})
    assert posted.status_code == 201, posted.text
    turn: dict[str, Any] = posted.json()["turn"]
    assert (turn["stoppedBy"], turn["reply"]) == ("approval", None)
    return session_id, turn


def _answered(client: TestClient, session_id: str) -> list[dict[str, Any]]:
    """The session's messages once the agent has answered after the user's message."""
    deadline = time.monotonic() + 60
    while True:
        messages: list[dict[str, Any]] = client.get(f"/api/sessions/{session_id}/messages").json()
        if messages and messages[-1]["role"] == "assistant":
            return messages
        assert time.monotonic() < deadline, f"no answer came: {messages}"
        time.sleep(0.1)


def _tool_results(scripted: ScriptedProvider) -> list[Any]:
    """What the model was sent as tool results in its second call."""
    assert len(scripted.requests) >= 2, "the conversation did not continue"
    return [m for m in scripted.requests[1].messages if m.role == "tool"]


def test_a_held_chat_turn_says_where_to_decide_and_the_chat_continues_once_approved(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    session_id, turn = _held_command(client, scripted)
    approval = turn["approvalId"]
    waiting = turn["waiting"]
    assert "execute_command waits for a person's approval" in waiting
    assert approval in waiting
    assert f"/sessions/{session_id}" in waiting
    assert f"/api/approvals/{approval}/approve" in waiting

    approved = client.post(f"/api/approvals/{approval}/approve")
    assert approved.status_code == 200, approved.text
    messages = _answered(client, session_id)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "run it"),
        ("assistant", "The command printed made."),
    ]
    [result] = _tool_results(scripted)
    assert "made" in str(result.content)
    assert not result.is_error


def test_a_denied_call_is_answered_with_the_denial_and_the_chat_continues(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    session_id, turn = _held_command(client, scripted)
    denied = client.post(f"/api/approvals/{turn['approvalId']}/deny", json={"reason": "not now"})
    assert denied.status_code == 200, denied.text
    messages = _answered(client, session_id)
    assert messages[-1]["content"] == "The command printed made."  # what the script says
    [result] = _tool_results(scripted)
    assert result.is_error
    assert "denied by a person: not now" in str(result.content)


def test_a_discussion_waits_for_a_held_call_and_goes_on_by_itself_once_it_is_approved(
    client: TestClient, scripted: ScriptedProvider, data_dir: Path
) -> None:
    ann = new_agent(client, "ann", toolIds=[tool_id("write_file")])
    new_agent(client, "ben")
    put = client.put(
        f"/api/agents/{ann['id']}/tool-settings", json={"approvals": {"write_file": "always"}}
    )
    assert put.status_code == 200, put.text
    scripted.then(
        calls(("write_file", WRITE)),  # ann's first turn: the call waits for a person
        speak("I wrote out.txt."),  # … and goes on from its result once approved
        speak("Thank you, ann."),  # ben
        speak("Then we are done."),  # ann
    )
    started = client.post(
        "/api/discussions",
        json={"theme": "files", "participants": ["ann", "ben"], "maxTurns": 3},
    )
    assert started.status_code == 201, started.text
    discussion_id = started.json()["id"]
    waiting = {"sessionId": discussion_id, "status": "pending"}
    deadline = time.monotonic() + 60
    while not (pending := client.get("/api/approvals", params=waiting).json()):
        assert time.monotonic() < deadline, "ann's call was never held"
        time.sleep(0.05)
    assert len(scripted.requests) == 1  # nobody spoke while the call waited

    approved = client.post(f"/api/approvals/{pending[0]['id']}/approve")
    assert approved.status_code == 200, approved.text
    deadline = time.monotonic() + 60
    while True:
        ended = client.get(f"/api/discussions/{discussion_id}").json()
        if ended["status"] != "active" and not ended["running"]:
            break
        assert time.monotonic() < deadline, f"the discussion never ended: {ended}"
        time.sleep(0.05)
    assert (ended["status"], ended["endedBy"], ended["turn"]) == ("completed", "max_turns", 3)
    said = [(m["speakerName"], m["content"]) for m in ended["messages"]]
    assert said == [
        ("ann", "I wrote out.txt."),
        ("ben", "Thank you, ann."),
        ("ann", "Then we are done."),
    ]
    [result] = _tool_results(scripted)  # ann's continued turn saw what the call did
    assert not result.is_error
    assert "A person approved your call to write_file" in str(scripted.requests[1].messages[-1])
    assert "I wrote out.txt." in str(scripted.requests[2].messages[-1].content)  # ben heard it
    assert [p.read_text() for p in data_dir.glob("agents/*/workspace/out.txt")] == ["made"]
