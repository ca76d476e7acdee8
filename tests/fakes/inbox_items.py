"""Inbox items made through the real services: a ticket that asked a person, spend rows."""

from __future__ import annotations

import uuid
from datetime import datetime

from opencrab.store import Database
from opencrab.store.repositories.metrics import MetricRow
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
