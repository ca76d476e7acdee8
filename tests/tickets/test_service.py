"""The ticket state machine and its session moves (seed 002, GAP-001/002/008), steps,
and a person's answer, on SQLite and PostgreSQL (`any_db`)."""

from __future__ import annotations

import threading

import pytest

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.sessions import list_sessions, session_messages
from opencrab.errors import NotFoundError, TicketStateError, ValidationError
from opencrab.event_log import EventLog
from opencrab.events import UserEvent
from opencrab.store import Database
from opencrab.tickets import service
from opencrab.tickets.states import MOVES, check_move


@pytest.fixture
def agent_id(any_db: Database, settings: Settings) -> str:
    return AgentStore(any_db, settings).create(AgentCreate(name="aki", prompt="Work.")).id


def _statuses(db: Database, ticket_id: str) -> list[str]:
    """The ticket's sessions' statuses, oldest first."""
    rows = list_sessions(db, ticket_id=ticket_id)
    return [r.status for r in sorted(rows, key=lambda r: r.created_at)]


def test_a_new_ticket_is_pending_with_no_session(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id, params={"n": 1}, context={"goal": "g"})
    assert (ticket.status, ticket.agent_name, ticket.steps) == ("pending", "aki", [])
    assert (ticket.params, ticket.context, ticket.error_message) == ({"n": 1}, {"goal": "g"}, None)
    assert ticket.current_session_id is None
    assert service.get_ticket(any_db, ticket.id) == ticket


def test_a_ticket_for_an_unknown_agent_is_refused(any_db: Database, agent_id: str) -> None:
    with pytest.raises(NotFoundError, match="no agent 00000000-0000-4000-8000-000000000000"):
        service.create_ticket(any_db, "00000000-0000-4000-8000-000000000000")
    with pytest.raises(ValidationError, match="not a UUID"):
        service.create_ticket(any_db, "aki")
    assert service.list_tickets(any_db) == []


def test_start_opens_a_new_active_session(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    running = service.start_ticket(any_db, ticket.id)
    assert running.status == "running"
    assert running.current_session_id is not None
    assert _statuses(any_db, ticket.id) == ["active"]
    with pytest.raises(TicketStateError, match="is running; only a pending ticket can start"):
        service.start_ticket(any_db, ticket.id)
    assert _statuses(any_db, ticket.id) == ["active"]


def test_resume_continues_the_same_session(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    session = service.start_ticket(any_db, ticket.id).current_session_id
    suspended = service.suspend_ticket(any_db, ticket.id)
    assert (suspended.status, suspended.current_session_id) == ("suspended", session)
    assert _statuses(any_db, ticket.id) == ["suspended"]
    resumed = service.resume_ticket(any_db, ticket.id)
    assert (resumed.status, resumed.current_session_id) == ("running", session)
    assert _statuses(any_db, ticket.id) == ["active"]


@pytest.mark.parametrize("status", ["pending", "running", "completed", "failed"])
def test_resume_needs_a_suspended_ticket(any_db: Database, agent_id: str, status: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    if status != "pending":
        service.start_ticket(any_db, ticket.id)
    if status == "completed":
        service.complete_ticket(any_db, ticket.id)
    elif status == "failed":
        service.fail_ticket(any_db, ticket.id, "broke")
    before = service.get_ticket(any_db, ticket.id)
    with pytest.raises(TicketStateError, match=f"is {status}; only a suspended ticket can resume"):
        service.resume_ticket(any_db, ticket.id)
    assert service.get_ticket(any_db, ticket.id) == before


def test_reset_archives_the_session_keeps_steps_and_a_new_run_gets_a_new_session(
    any_db: Database, agent_id: str
) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    first = service.start_ticket(any_db, ticket.id).current_session_id
    service.add_step(any_db, ticket.id, "fetch")
    service.update_step(any_db, ticket.id, 0, status="completed", result={"files": 3})
    service.suspend_ticket(any_db, ticket.id)
    reset = service.reset_ticket(any_db, ticket.id)
    assert (reset.status, reset.current_session_id) == ("pending", None)
    assert [(s.index, s.title, s.status, s.result) for s in reset.steps] == [
        (0, "fetch", "completed", {"files": 3})
    ]
    assert _statuses(any_db, ticket.id) == ["completed"]
    again = service.start_ticket(any_db, ticket.id).current_session_id
    assert again is not None
    assert again != first
    assert _statuses(any_db, ticket.id) == ["completed", "active"]


def test_reset_of_a_pending_ticket_touches_no_archived_session(
    any_db: Database, agent_id: str
) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    service.start_ticket(any_db, ticket.id)
    service.fail_ticket(any_db, ticket.id, "no network")
    service.reset_ticket(any_db, ticket.id)
    assert service.reset_ticket(any_db, ticket.id).status == "pending"
    assert _statuses(any_db, ticket.id) == ["failed"]  # archived as it ended


def test_fail_keeps_the_reason_and_reset_clears_it(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    service.start_ticket(any_db, ticket.id)
    with pytest.raises(ValidationError, match="needs a reason"):
        service.fail_ticket(any_db, ticket.id, "  ")
    failed = service.fail_ticket(any_db, ticket.id, "the repository is gone")
    assert (failed.status, failed.error_message) == ("failed", "the repository is gone")
    assert _statuses(any_db, ticket.id) == ["failed"]
    assert service.reset_ticket(any_db, ticket.id).error_message is None


def test_complete_ends_ticket_and_session(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    with pytest.raises(TicketStateError, match="is pending; only a running ticket can complete"):
        service.complete_ticket(any_db, ticket.id)
    service.start_ticket(any_db, ticket.id)
    assert service.complete_ticket(any_db, ticket.id).status == "completed"
    assert _statuses(any_db, ticket.id) == ["completed"]
    with pytest.raises(TicketStateError):
        service.suspend_ticket(any_db, ticket.id)


def test_every_move_is_checked_against_its_sources() -> None:
    for name, move in MOVES.items():
        for status in ("pending", "running", "suspended", "completed", "failed"):
            if status in move.sources:
                assert check_move("t", status, name) is move
            else:
                with pytest.raises(TicketStateError):
                    check_move("t", status, name)


def test_steps_keep_index_order_and_their_results(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    assert [service.add_step(any_db, ticket.id, t).index for t in ("a", "b", "c")] == [0, 1, 2]
    service.update_step(any_db, ticket.id, 2, status="running")
    service.update_step(any_db, ticket.id, 0, status="failed", result={"why": "x"})
    steps = service.get_ticket(any_db, ticket.id).steps
    assert [(s.index, s.title, s.status, s.result) for s in steps] == [
        (0, "a", "failed", {"why": "x"}),
        (1, "b", "pending", None),
        (2, "c", "running", None),
    ]
    with pytest.raises(NotFoundError, match="has no step 3"):
        service.update_step(any_db, ticket.id, 3, status="completed")
    with pytest.raises(ValidationError, match="1 to 200 characters"):
        service.add_step(any_db, ticket.id, "x" * 201)


def test_an_answer_to_a_suspended_session_resumes_it(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    session = service.start_ticket(any_db, ticket.id).current_session_id
    assert session is not None
    service.suspend_ticket(any_db, ticket.id)
    row = service.answer_ticket_session(any_db, session, "Use the main branch.", sender_id="mei")
    assert (row.role, row.content, row.speaker_id) == ("user", "Use the main branch.", "mei")
    after = service.get_ticket(any_db, ticket.id)
    assert (after.status, after.current_session_id) == ("running", session)
    assert _statuses(any_db, ticket.id) == ["active"]
    trace = EventLog(any_db).trace(session)
    assert [type(e) for e in trace] == [UserEvent]
    assert str(trace[0].id) == str(row.event_id)
    # a running ticket's session takes the message into its next turn's history
    service.answer_ticket_session(any_db, session, "And be quick.")
    assert service.get_ticket(any_db, ticket.id).status == "running"
    assert [m.content for m in session_messages(any_db, session)] == [
        "Use the main branch.",
        "And be quick.",
    ]


def test_an_ended_session_takes_no_answer(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    session = service.start_ticket(any_db, ticket.id).current_session_id
    assert session is not None
    service.reset_ticket(any_db, ticket.id)
    with pytest.raises(ValidationError, match="is completed; reset ticket"):
        service.answer_ticket_session(any_db, session, "hello?")
    assert session_messages(any_db, session) == []
    assert service.get_ticket(any_db, ticket.id).status == "pending"
    with pytest.raises(NotFoundError, match="no ticket session"):
        service.answer_ticket_session(any_db, "00000000-0000-4000-8000-000000000000", "hi")


def test_list_filters_by_status_and_agent(
    any_db: Database, agent_id: str, settings: Settings
) -> None:
    other = AgentStore(any_db, settings).create(AgentCreate(name="bo", prompt="Work.")).id
    a = service.create_ticket(any_db, agent_id)
    b = service.create_ticket(any_db, other)
    service.start_ticket(any_db, b.id)
    assert {t.id for t in service.list_tickets(any_db)} == {a.id, b.id}
    assert [t.id for t in service.list_tickets(any_db, status="running")] == [b.id]
    assert [(t.id, t.agent_name) for t in service.list_tickets(any_db, agent_id=agent_id)] == [
        (a.id, "aki")
    ]
    assert service.list_tickets(any_db, status="failed") == []


def test_delete_takes_steps_sessions_and_messages(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    session = service.start_ticket(any_db, ticket.id).current_session_id
    assert session is not None
    service.add_step(any_db, ticket.id, "a")
    service.answer_ticket_session(any_db, session, "hi")
    service.delete_ticket(any_db, ticket.id)
    with pytest.raises(NotFoundError, match="no ticket"):
        service.get_ticket(any_db, ticket.id)
    assert list_sessions(any_db, ticket_id=ticket.id) == []
    with pytest.raises(NotFoundError):
        session_messages(any_db, session)
    with pytest.raises(NotFoundError):
        service.delete_ticket(any_db, ticket.id)


def test_two_resumes_at_once_resume_once(any_db: Database, agent_id: str) -> None:
    ticket = service.create_ticket(any_db, agent_id)
    service.start_ticket(any_db, ticket.id)
    service.suspend_ticket(any_db, ticket.id)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def resume() -> None:
        start.wait()
        try:
            service.resume_ticket(any_db, ticket.id)
            outcomes.append("resumed")
        except TicketStateError:
            outcomes.append("refused")

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused", "resumed"]
    assert _statuses(any_db, ticket.id) == ["active"]
