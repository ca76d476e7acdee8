"""Tool approvals in the engine: a held call is not run, waits as a pending approval and
ends the turn; a person's approval runs it once, a denial answers it with an error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.approval_decisions import AlreadyDecided
from opencrab.core.approval_followups import FOLLOW_UP, follow_up_sender, follow_up_text
from opencrab.core.approvals import unsafe_call
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import session_messages
from opencrab.core.steps import TurnResult, step_from_json, step_json
from opencrab.core.tools import tool_id
from opencrab.errors import NotFoundError
from opencrab.events import ToolResultEvent
from opencrab.llm.types import ChatRequest
from opencrab.messages import IncomingMessage, InternalSource, Sender
from opencrab.store import Database
from opencrab.store.repositories import approvals as repo
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.scripted_runtime import scripted_runtime

GRANTED = ["write_file", "read_file", "execute_command"]


@pytest.fixture
async def rt(
    settings: Settings, any_db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    """A runtime on each database (SQLite and PostgreSQL); tests queue the replies."""
    scripted.outcomes.clear()
    async with scripted_runtime(settings, any_db, scripted) as runtime:
        yield runtime


def _agent(rt: Runtime, **approvals: Any) -> Agent:
    agent = rt.agents.create(
        AgentCreate(name="aki", prompt="You keep files.", tool_ids=[tool_id(n) for n in GRANTED])
    )
    save_tool_settings(rt.db, agent.id, ToolSettings(execute_command=True, approvals=approvals))
    return agent


def _workspace(data_dir: Path, agent: Agent) -> Path:
    return data_dir / "agents" / agent.id / "workspace"


def _tool_messages(request: ChatRequest) -> dict[str, tuple[str, bool]]:
    tools = [m for m in request.messages if m.role == "tool"]
    return {m.tool_call_id or "": (m.text, m.is_error) for m in tools}


def _answers_every_call(request: ChatRequest) -> bool:
    """Every tool call in the history is followed by its result (what providers require)."""
    answered = set(_tool_messages(request))
    return all(c.id in answered for m in request.messages for c in m.tool_calls or [])


async def test_a_held_call_is_not_run_and_ends_the_turn(
    rt: Runtime, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = _agent(rt, write_file="unsafe")
    held = calls(
        ("write_file", {"path": "out.txt", "content": "made"}),
        ("read_file", {"path": "out.txt"}),
    )
    scripted.then(held)
    result = await rt.turns.chat(agent, "write it")

    assert result.stopped_by == "approval"
    assert result.approval_id is not None
    assert not (_workspace(data_dir, agent) / "out.txt").exists()  # not run
    [later] = result.actions  # the reply's other call: answered with an error
    assert later.name == "read_file"
    assert not later.result.success
    assert "waits for a person's approval" in (later.result.error or "")
    wire = step_json(result)
    assert (wire["stoppedBy"], wire["approvalId"]) == ("approval", result.approval_id)
    back = step_from_json(wire)
    assert isinstance(back, TurnResult)
    assert back.approval_id == result.approval_id

    [pending] = rt.approvals.list_approvals(session_id=result.session_id, status="pending")
    assert pending.id == result.approval_id
    assert (pending.tool_name, pending.arguments) == (
        "write_file",
        {"path": "out.txt", "content": "made"},
    )
    assert pending.agent_id == agent.id
    assert pending.decided_at is None


async def test_approving_runs_the_call_once_and_the_agent_sees_its_result(
    rt: Runtime, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = _agent(rt, write_file="always")
    write = calls(("write_file", {"path": "out.txt", "content": "made"}))
    scripted.then(write, speak("done"))
    result = await rt.turns.chat(agent, "write it")
    assert result.approval_id is not None

    decided = await rt.approvals.decide(result.approval_id, approve=True, by="ops")
    assert (decided.status, decided.decided_by) == ("approved", "ops")
    assert (_workspace(data_dir, agent) / "out.txt").read_text() == "made"
    [event] = [
        e for e in rt.engine.events.trace(result.trace_id) if str(e.id) == decided.result_event_id
    ]
    assert isinstance(event, ToolResultEvent)
    assert not event.content.is_error
    assert str(event.content.tool_call_id) == decided.call_event_id
    with pytest.raises(AlreadyDecided):
        await rt.approvals.decide(result.approval_id, approve=False)
    assert rt.approvals.get(result.approval_id).status == "approved"  # nothing lost

    await rt.turns.chat(agent, "and now?", session_id=result.session_id)
    request = scripted.requests[-1]
    output, is_error = _tool_messages(request)[write.tool_calls[0].id]
    assert not is_error
    assert "out.txt" in output
    assert _answers_every_call(request)


async def test_a_denial_is_an_error_result_the_agent_sees(
    rt: Runtime, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = _agent(rt, execute_command="unsafe")
    command = calls(("execute_command", {"command": "echo ran > ran.txt"}))
    scripted.then(command, speak("understood"))
    result = await rt.turns.chat(agent, "run it")
    assert result.approval_id is not None

    decided = await rt.approvals.decide(result.approval_id, approve=False, reason="not today")
    assert (decided.status, decided.reason) == ("denied", "not today")
    assert not (_workspace(data_dir, agent) / "ran.txt").exists()

    await rt.turns.chat(agent, "well?", session_id=result.session_id)
    output, is_error = _tool_messages(scripted.requests[-1])[command.tool_calls[0].id]
    assert is_error
    assert "denied by a person: not today" in output


async def test_two_approvals_at_once_run_the_call_once(
    rt: Runtime, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = _agent(rt, execute_command="always")
    scripted.then(calls(("execute_command", {"command": "echo run >> count.txt"})))
    result = await rt.turns.chat(agent, "count")
    assert result.approval_id is not None

    outcomes = await asyncio.gather(
        rt.approvals.decide(result.approval_id, approve=True),
        rt.approvals.decide(result.approval_id, approve=True),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["AlreadyDecided", "ApprovalRecord"]
    assert (_workspace(data_dir, agent) / "count.txt").read_text() == "run\n"


def test_only_one_claim_of_a_pending_approval_wins(any_db: Database) -> None:
    """The conditional update itself: the second claim changes nothing."""
    from opencrab.core.agent import AgentStore
    from opencrab.core.sessions import ensure_chat_session
    from opencrab.store.repositories.approvals import ApprovalRecord
    from opencrab.store.types import utcnow

    agent = AgentStore(any_db, Settings()).create(AgentCreate(name="aki", prompt="p"))
    session = "6f0c1d2e-0000-4000-8000-000000000001"
    ensure_chat_session(any_db, agent.id, session)
    record = ApprovalRecord(
        id="6f0c1d2e-0000-4000-8000-000000000002",
        session_id=session,
        agent_id=agent.id,
        trace_id=session,
        tool_name="write_file",
        arguments={"path": "a"},
        call_id="c1",
        call_event_id="6f0c1d2e-0000-4000-8000-000000000003",
        status="pending",
        created_at=utcnow(),
        decided_at=None,
        decided_by=None,
        reason=None,
        result_event_id=None,
    )
    with any_db.write() as conn:
        repo.insert(conn, record)
    with any_db.write() as conn:
        first = repo.claim(conn, record.id, "approved", by="a", reason=None, at=utcnow())
    with any_db.write() as conn:
        second = repo.claim(conn, record.id, "denied", by="b", reason="late", at=utcnow())
    assert (first, second) == (True, False)
    with any_db.read() as conn:
        stored = repo.get(conn, record.id)
    assert stored is not None
    assert (stored.status, stored.decided_by) == ("approved", "a")


async def test_policies_hold_only_what_they_name(
    rt: Runtime, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = _agent(rt, read_file="unsafe", write_file="never")
    scripted.then(
        calls(("write_file", {"path": "a.txt", "content": "x"})),
        calls(("read_file", {"path": "a.txt"})),
        speak("read"),
    )
    result = await rt.turns.chat(agent, "go")
    assert result.stopped_by == "send_speech"  # nothing held: reads are safe
    assert [a.result.success for a in result.actions] == [True, True, True]
    assert rt.approvals.list_approvals(session_id=result.session_id) == []


def test_unsafe_calls_are_commands_writes_and_non_get_requests() -> None:
    assert unsafe_call("execute_command", {"command": "ls"})
    assert unsafe_call("write_file", {"path": "a", "content": ""})
    assert unsafe_call("http_request", {"url": "http://x", "method": "post"})
    assert not unsafe_call("http_request", {"url": "http://x"})
    assert not unsafe_call("http_request", {"url": "http://x", "method": " get "})
    assert not unsafe_call("read_file", {"path": "a"})
    assert not unsafe_call("fetch_webpage", {"url": "http://x"})


async def test_a_chat_turn_while_a_call_waits_still_answers_every_call(
    rt: Runtime, scripted: ScriptedProvider
) -> None:
    agent = _agent(rt, write_file="always")
    write = calls(("write_file", {"path": "out.txt", "content": "made"}))
    scripted.then(write, speak("waiting"))
    result = await rt.turns.chat(agent, "write it")
    await rt.turns.chat(agent, "anything?", session_id=result.session_id)
    request = scripted.requests[-1]
    assert _answers_every_call(request)  # a provider refuses an unanswered call
    output, is_error = _tool_messages(request)[write.tool_calls[0].id]
    assert is_error
    assert "approval" in output
    with pytest.raises(NotFoundError):
        rt.approvals.get("6f0c1d2e-0000-4000-8000-0000000000ff")


async def test_a_follow_up_whose_turn_already_ran_to_its_end_is_not_run_again(
    rt: Runtime, scripted: ScriptedProvider
) -> None:
    agent = _agent(rt, write_file="always")
    scripted.then(calls(("write_file", {"path": "out.txt", "content": "made"})), reply("Written."))
    result = await rt.turns.chat(agent, "write it")
    assert result.approval_id is not None
    decided = await rt.approvals.decide(result.approval_id, approve=True)
    assert decided.follow_up == "pending"  # recorded with the decision; nothing runs it here
    # a process ran the follow-up turn to its end and died before marking it done
    message = IncomingMessage.text(
        follow_up_text(decided),
        source=InternalSource(origin=FOLLOW_UP),
        sender=Sender(id=follow_up_sender(decided.id)),
    )
    await rt.turns.run(agent, message, session_id=result.session_id, create=False)
    asked = len(scripted.requests)

    rt.approvals.follow_ups.start()  # another process takes it over
    async with asyncio.timeout(60):
        while rt.approvals.get(decided.id).follow_up == "pending":
            await asyncio.sleep(0.05)
    assert rt.approvals.get(decided.id).follow_up == "done"
    assert len(scripted.requests) == asked  # not run again
    said = [(m.role, m.content) for m in session_messages(rt.db, result.session_id)]
    assert said == [("user", "write it"), ("assistant", "Written.")]
    with rt.db.read() as conn:
        outcome = repo.answered(conn, [decided.id])[decided.id]
    assert outcome.steps[-1]["reply"] == "Written."  # what a waiting gateway is handed
