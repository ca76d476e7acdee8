"""Inbox items made through the real services: a ticket that asked a person, a held
call written as the engine writes one, spend rows."""

from __future__ import annotations

import uuid
from datetime import datetime

from opencrab.core.approvals import approval_hooks
from opencrab.event_log import EventLog
from opencrab.events import ToolCallEvent, ToolCallPayload
from opencrab.store import Database
from opencrab.store.repositories import approvals as approvals_repo
from opencrab.store.repositories.approvals import ApprovalRecord
from opencrab.store.repositories.metrics import MetricRow
from opencrab.store.types import utcnow
from opencrab.tickets import service as tickets


def ask(db: Database, agent_id: str, question: str, goal: str = "review") -> tuple[str, str]:
    """A ticket of `agent_id` that asked `question` and waits (suspended): (ticket id,
    its session id), as the ticket's agent would leave it after `ask_human`."""
    ticket = tickets.create_ticket(db, agent_id, context={"goal": goal})
    running = tickets.start_ticket(db, ticket.id)
    session_id = str(running.current_session_id)
    with db.write() as conn:
        tickets.say_in(conn, db, session_id, agent_id, question)
    tickets.suspend_ticket(db, ticket.id, "asked a person")
    return ticket.id, session_id


def spend_row(agent_id: str, at: datetime, cost_usd: float, task_type: str | None) -> MetricRow:
    """One successful call of `agent_id` at `at` that cost `cost_usd`."""
    return MetricRow(
        id=str(uuid.uuid4()),
        agent_id=agent_id,
        session_id=None,
        timestamp=at,
        provider="openai",
        model="gpt-5-mini",
        purpose="conversation",
        task_type=task_type,
        complexity=None,
        input_tokens=100,
        output_tokens=10,
        total_tokens=110,
        cache_read_tokens=0,
        cache_write_tokens=0,
        reasoning_tokens=0,
        estimated_cost_usd=cost_usd,
        cost_source="pricing",
        latency_ms=100,
        time_to_first_token_ms=None,
        status="ok",
        error_type=None,
        error=None,
        stream=False,
        request_id=None,
        attempt=1,
        fallback_from=None,
        quality_score=None,
        self_evaluation=None,
        task_success=None,
        would_use_again=None,
        better_model_suggestion=None,
        created_at=at,
    )


def hold_call(db: Database, agent_id: str, goal: str, arguments: dict[str, str]) -> tuple[str, str]:
    """A running ticket of `agent_id` whose turn held a write_file call (`hold_in`);
    returns (ticket id, approval id)."""
    ticket = tickets.create_ticket(db, agent_id, context={"goal": goal})
    _, approval_id = hold_in(db, ticket.id, agent_id, arguments)
    return ticket.id, approval_id


def hold_in(
    db: Database, ticket_id: str, agent_id: str, arguments: dict[str, str]
) -> tuple[str, str]:
    """The ticket started, its turn holding a write_file call written as the engine
    writes it (the call event, the pending approval, the ticket suspended by the
    approval hook); returns (session id, approval id)."""
    session = str(tickets.start_ticket(db, ticket_id).current_session_id)
    call = ToolCallEvent(
        id=uuid.uuid4(),
        trace_id=uuid.UUID(session),
        parent_id=None,
        timestamp=utcnow(),
        content=ToolCallPayload(name="write_file", arguments=arguments),
        metadata={"call_id": "call_1"},
    )
    record = ApprovalRecord(
        id=str(uuid.uuid4()),
        session_id=session,
        agent_id=agent_id,
        trace_id=session,
        tool_name="write_file",
        arguments=arguments,
        call_id="call_1",
        call_event_id=str(call.id),
        status="pending",
        created_at=utcnow(),
        decided_at=None,
        decided_by=None,
        reason=None,
        result_event_id=None,
    )
    with db.write() as conn:
        EventLog(db).append_many([call], conn=conn)
        approvals_repo.insert(conn, record)
        for hook in approval_hooks():
            hook.held(conn, record)
    return session, record.id
