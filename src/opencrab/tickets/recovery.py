"""Picking up a ticket whose process died mid-run (issue 20 §4).

Everything a turn did is durable step by step (core/recorder.py), so a `running` ticket
taken over from a dead process continues from its last recorded step. What may be left
is a tool call whose `tool_call` event was written but whose result never was. The
first such call of the trace's last reply, when nothing but that reply's own records
follows it, was in flight: the process died while it ran; any other never started (its
reply's turn ended first, or a call before it was the one in flight). Each gets an error
result now (the model's history needs one), and:

- a call in flight that may have changed something outside the store (`execute_command`,
  `write_file`, `http_request` with any method but GET: `changes_outside`) is NOT run
  again: the ticket suspends for a person, with the call shown as a message of its
  session and as its error message;
- any other call (reads, store-only actions, calls that never started) is left to the
  model, which sees what happened and may call it again.

Example:
    if settle_interrupted_calls(db, session_id, agent_id, ticket_id):
        return  # suspended: a person decides about the call left in flight
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from opencrab.event_log import EventLog
from opencrab.events import (
    MessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    ToolResultPayload,
    UserEvent,
)
from opencrab.store import Database
from opencrab.store.types import utcnow
from opencrab.tickets import service

OUTSIDE_EFFECTS = frozenset({"execute_command", "write_file"})
NOT_STARTED = "not run: the turn ended before this call started; call it again if still needed"
INTERRUPTED = (
    "interrupted: the process running this ticket stopped before this call's result was "
    "recorded, so it is not known whether it ran"
)


def changes_outside(name: str, arguments: Any) -> bool:
    """True when a call of `name` with `arguments` may change something outside the store
    (a command, a file written, an HTTP request other than GET): never re-run blindly."""
    if name in OUTSIDE_EFFECTS:
        return True
    if name == "http_request":
        method = arguments.get("method", "GET") if isinstance(arguments, dict) else None
        return not isinstance(method, str) or method.strip().upper() != "GET"
    return False


@dataclass(frozen=True)
class InterruptedCall:
    """A tool call recorded without a result; `in_flight` when it was running as its
    process died (else it never started)."""

    event: ToolCallEvent
    in_flight: bool

    @property
    def name(self) -> str:
        return self.event.content.name

    @property
    def arguments(self) -> Any:
        return self.event.content.arguments

    def shown(self) -> str:
        """The call as a person reads it."""
        arguments = json.dumps(self.arguments, ensure_ascii=False, indent=2, default=str)
        return f"{self.name}\n```json\n{arguments}\n```"


def interrupted_calls(db: Database, session_id: str) -> list[InterruptedCall]:
    """The session's tool calls that have no result, in the order they were made."""
    events = EventLog(db).trace(session_id)
    answered = {str(e.content.tool_call_id) for e in events if isinstance(e, ToolResultEvent)}
    # what follows the last message or user event is the tail of a turn cut off mid-reply
    boundary = max(
        (i for i, e in enumerate(events) if isinstance(e, MessageEvent | UserEvent)), default=-1
    )
    found: list[InterruptedCall] = []
    for index, event in enumerate(events):
        if isinstance(event, ToolCallEvent) and str(event.id) not in answered:
            first_in_tail = index > boundary and not any(c.in_flight for c in found)
            found.append(InterruptedCall(event, in_flight=first_in_tail))
    return found


def settle_interrupted_calls(db: Database, session_id: str, agent_id: str, ticket_id: str) -> bool:
    """Answer the session's interrupted calls with an error result; when one of them may
    have changed something outside the store, suspend the ticket for a person in the same
    transaction, the calls shown. True when it suspended the ticket."""
    calls = interrupted_calls(db, session_id)
    if not calls:
        return False
    risky = [c for c in calls if c.in_flight and changes_outside(c.name, c.arguments)]
    log = EventLog(db)
    with db.write() as conn:
        parent = log.last_id(session_id, conn=conn)
        results = []
        for call in calls:
            if not call.in_flight:
                note = NOT_STARTED
            elif call in risky:
                note = INTERRUPTED + "; it was not run again: a person was asked"
            else:
                note = INTERRUPTED + "; call it again if it is still needed"
            meta = call.event.metadata if isinstance(call.event.metadata, dict) else {}
            result = ToolResultEvent(
                id=uuid4(),
                trace_id=UUID(session_id),
                parent_id=parent,
                timestamp=utcnow(),
                content=ToolResultPayload(
                    output=json.dumps({"error": note}), tool_call_id=call.event.id, is_error=True
                ),
                metadata={"call_id": meta.get("call_id", str(call.event.id)), "name": call.name},
            )
            results.append(result)
            parent = result.id
        log.append_many(results, conn=conn)
        if not risky:
            return False
        shown = "\n\n".join(call.shown() for call in risky)
        reason = (
            "The process running this ticket stopped while this call was in flight; it may "
            "or may not have taken effect and was not run again. Check, then answer to let "
            f"the agent go on (or reset the ticket):\n\n{shown}"
        )
        service.say_in(conn, db, session_id, agent_id, reason, notice=True)
        names = ", ".join(call.name for call in risky)
        service.move_in(conn, ticket_id, "suspend", f"interrupted in flight: {names}")
    return True
