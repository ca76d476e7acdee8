"""The ticket scheduler's decisions (tickets/scheduler.py), each through the real app with
a scripted model: limits suspend a ticket with the reason and a person's answer starts a
new stretch; an agent that errors out fails its ticket; the daily budget suspends it; a
ticket reset while it runs stops being run and starts again in a new session; bad limit
params fail it with a message naming them; the ticket actions refuse outside a ticket."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.actions.base import ActionContext, ActionRegistry
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager
from opencrab.core.skills import SkillManager
from opencrab.core.workspace import Workspace
from opencrab.errors import ProviderBadRequest
from opencrab.store import Database
from opencrab.tickets.actions import AddStep, AskHuman, CompleteTicket, FailTicket, UpdateStep
from opencrab.tickets.scheduler import NUDGE
from tests.fakes.scripted_provider import ScriptedProvider
from tests.tickets.conftest import calls, wait_for


def ticket(api: TestClient, ticket_id: str) -> dict[str, Any]:
    response = api.get(f"/api/tickets/{ticket_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def settled(api: TestClient, ticket_id: str, status: str) -> dict[str, Any]:
    return dict(
        wait_for(
            f"ticket {ticket_id} to be {status}",
            lambda: (t := ticket(api, ticket_id))["status"] == status and t,
        )
    )


def create(api: TestClient, agent_id: str, **body: Any) -> str:
    response = api.post("/api/tickets", json={"agentId": agent_id, **body})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def messages(api: TestClient, session_id: str) -> list[dict[str, Any]]:
    return list(api.get(f"/api/sessions/{session_id}").json()["messages"])


def test_the_turn_limit_suspends_and_an_answer_starts_a_new_stretch(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then("I am thinking about it.")  # a plain reply, every time: no ticket action
    ticket_id = create(api, agent["id"], params={"maxTurns": 2})
    waiting = settled(api, ticket_id, "suspended")
    assert waiting["errorMessage"] == "turn limit reached: 2 turns (maxTurns 2)"
    assert len(scripted.requests) == 2
    second = [str(m.content) for m in scripted.requests[1].messages if m.role == "user"]
    assert NUDGE in second[-1]  # the second turn was nudged on
    session = waiting["currentSessionId"]
    assert messages(api, session)[-1]["content"].startswith("Suspended: turn limit reached")

    answer = api.post(f"/api/sessions/{session}/messages", json={"content": "Go on."})
    assert answer.status_code == 201, answer.text
    again = wait_for("a second stretch", lambda: len(scripted.requests) == 4)
    assert again
    settled(api, ticket_id, "suspended")
    assert len(scripted.requests) == 4  # two more turns, then it waits again


def test_an_agent_that_errors_out_fails_its_ticket(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then(ProviderBadRequest("the model refused the request"))
    ticket_id = create(api, agent["id"], context={"goal": "g"})
    failed = settled(api, ticket_id, "failed")
    assert failed["errorMessage"] == "provider_bad_request: the model refused the request"
    session = api.get(f"/api/sessions/{failed['currentSessionId']}").json()
    assert session["status"] == "failed"


def test_the_agents_daily_budget_suspends_its_ticket(
    api: TestClient, scripted: ScriptedProvider
) -> None:
    broke = api.post(
        "/api/agents", json={"name": "broke", "prompt": "p", "llm": {"dailyBudgetUsd": 0}}
    )
    assert broke.status_code == 201, broke.text
    scripted.then(calls(("complete_ticket", {"summary": "never"})))
    ticket_id = create(api, broke.json()["id"])
    waiting = settled(api, ticket_id, "suspended")
    assert waiting["errorMessage"].startswith("budget_exceeded: agent broke has spent")
    assert scripted.requests == []


def test_max_cost_is_checked_before_each_call_within_a_turn(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    def costly(title: str) -> Any:
        answer = calls(("add_step", {"title": title}))
        return answer.model_copy(update={"cost_usd": 1.0})

    # one turn: two steps, then complete — but two calls ($2) already reach $1.5 (each
    # call's estimate, about $0.03, fits before it)
    scripted.then(costly("read"), costly("write"), calls(("complete_ticket", {"summary": "x"})))
    ticket_id = create(api, agent["id"], params={"maxCostUsd": 1.5})
    waiting = settled(api, ticket_id, "suspended")
    assert waiting["errorMessage"].startswith(
        "budget_exceeded: ticket cost limit reached: $2.0000 (maxCostUsd 1.5)"
    )
    assert len(scripted.requests) == 2  # exceeded by one call, never more


def test_max_cost_alerts_at_80_and_100_percent_once_per_ticket(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    def costly(title: str) -> Any:
        answer = calls(("add_step", {"title": title}))
        return answer.model_copy(update={"cost_usd": 1.0})

    # before the 2nd call $1 of $1.2 (83 %; its estimate fits), before the 3rd $2
    # (167 %): refused
    scripted.then(costly("read"), costly("write"), calls(("complete_ticket", {"summary": "x"})))
    ticket_id = create(api, agent["id"], params={"maxCostUsd": 1.2})
    settled(api, ticket_id, "suspended")
    listed = api.get("/api/budgets/alerts").json()
    assert [(a["scope"], a["ticketId"], a["cap"], a["thresholdPercent"]) for a in listed] == [
        ("ticket", ticket_id, "ticket", 100),
        ("ticket", ticket_id, "ticket", 80),
    ]
    assert (listed[1]["spentUsd"], listed[1]["capUsd"]) == (1.0, 1.2)
    assert [a["ticketId"] for a in api.get("/api/budgets").json()["alerts"]] == [ticket_id] * 2


def test_bad_limit_params_fail_the_ticket_naming_them(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then(calls(("complete_ticket", {"summary": "never"})))
    ticket_id = create(api, agent["id"], params={"maxCostUsd": "lots"})
    failed = settled(api, ticket_id, "failed")
    assert failed["errorMessage"] == "params.maxCostUsd must be a positive number, not 'lots'"
    assert scripted.requests == []


@pytest.fixture
def held(scripted: ScriptedProvider) -> Iterator[threading.Event]:
    scripted.hold = threading.Event()
    yield scripted.hold
    scripted.hold.set()  # never leave a worker thread waiting


def test_a_ticket_reset_while_it_runs_stops_and_runs_again_in_a_new_session(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider, held: threading.Event
) -> None:
    scripted.then(
        calls(("complete_ticket", {"summary": "from the old session"})),  # held, then refused
        "The ticket was reset under me.",
        calls(("complete_ticket", {"summary": "from the new session"})),
    )
    ticket_id = create(api, agent["id"])
    wait_for("the first model call", lambda: scripted.calls_started == 1)
    old = ticket(api, ticket_id)["currentSessionId"]
    assert api.patch(f"/api/tickets/{ticket_id}/reset").status_code == 200
    held.set()
    done = settled(api, ticket_id, "completed")
    assert done["currentSessionId"] != old
    assert messages(api, done["currentSessionId"])[-1]["content"] == "from the new session"
    archived = api.get(f"/api/sessions/{old}").json()
    assert archived["status"] == "completed"  # as the reset left it
    assert "from the old session" not in [m["content"] for m in archived["messages"]]
    refused = [str(m.content) for m in scripted.requests[1].messages if m.role == "tool"]
    assert "this ticket session is completed; complete_ticket is not possible now" in refused[-1]


async def test_the_ticket_actions_refuse_outside_a_ticket_session(
    db: Database, settings: Settings
) -> None:
    agent = AgentStore(db, settings).create(AgentCreate(name="aki"))
    registry = ActionRegistry([AddStep(), UpdateStep(), AskHuman(), CompleteTicket(), FailTicket()])
    ctx = ActionContext(
        agent=agent,
        db=db,
        settings=settings,
        workspace=Workspace.for_agent(settings, agent.id),
        memory=MemoryManager(db, agent.id),
        skills=SkillManager(db, agent.id, []),
        registry=registry,
        session_id="00000000-0000-4000-8000-000000000000",
    )
    args: dict[str, dict[str, Any]] = {
        "add_step": {"title": "t"},
        "update_step": {"index": 0, "status": "completed"},
        "ask_human": {"question": "q"},
        "complete_ticket": {"summary": "s"},
        "fail_ticket": {"reason": "r"},
    }
    for name, arguments in args.items():
        result = await registry.dispatch(name, arguments, ctx)
        assert result.error == f"{name} can be called only while running a ticket"


def test_a_call_after_ask_human_in_one_reply_never_ran_and_is_not_taken_for_in_flight(
    api: TestClient, agent: dict[str, Any], scripted: ScriptedProvider
) -> None:
    scripted.then(
        calls(
            ("ask_human", {"question": "May I write the file?"}),
            ("write_file", {"path": "notes.txt", "content": "x"}),  # the turn ends first
        ),
        calls(("complete_ticket", {"summary": "Done."})),
    )
    ticket_id = create(api, agent["id"])
    session = settled(api, ticket_id, "suspended")["currentSessionId"]
    answer = api.post(f"/api/sessions/{session}/messages", json={"content": "Yes."})
    assert answer.status_code == 201, answer.text
    done = settled(api, ticket_id, "completed")  # not suspended again for write_file
    assert done["errorMessage"] is None
    results = [str(m.content) for m in scripted.requests[1].messages if m.role == "tool"]
    assert "not run: the turn ended before this call started" in results[-1]
