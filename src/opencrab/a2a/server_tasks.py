"""A2A tasks that are tickets: how a ticket reads as an A2A Task, and the moves an A2A
caller makes on one (start, answer, cancel, follow).

The task's id is the ticket's id and its state is the ticket's (tickets/states.py):

    pending → submitted      running → working      suspended → input-required
    completed → completed    failed → failed (canceled, when it was canceled over A2A)

A suspended ticket waits for a person: the agent asked (ask_human), a limit of its stretch
or a budget was reached; the status message is the agent's last word in the ticket's
session (its question) or the ticket's reason. The history is that session's messages,
the metadata (`opencrab`) the ticket's id, session, status and steps; a completed ticket
carries its summary as the `result` artifact. `a2a_tasks` keeps only what the ticket has
no place for: the caller's contextId and who canceled it. Nothing else is stored, so a
task survives a restart as its ticket does.

Example:
    row = start_task(runtime, agent, "Review PR 7", context_id="ctx-1", params={})
    task = read_task(runtime, row.ticket_id)
    async for event in follow(runtime, task.id, poll_secs=0.5): ...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import NAMESPACE_URL, uuid4, uuid5

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import hold_turn, session_messages
from opencrab.errors import NotFoundError, TicketStateError
from opencrab.offload import run_blocking
from opencrab.store.repositories import a2a_tasks as repo
from opencrab.store.repositories import tickets as tickets_repo
from opencrab.store.repositories.a2a_tasks import A2aTaskRow
from opencrab.store.repositories.tickets import TicketRecord
from opencrab.store.types import utcnow
from opencrab.tickets import service

STATES: dict[str, TaskState] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    "suspended": TaskState.TASK_STATE_INPUT_REQUIRED,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
}
SETTLED = frozenset(
    {
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
    }
)
"""States in which a task waits for the caller or is over: message/send answers then."""
FINAL = SETTLED - {TaskState.TASK_STATE_INPUT_REQUIRED}
CANCELED_REASON = "canceled over A2A by {who}"
HISTORY = 1000  # messages of the ticket's session a task carries at most


@dataclass(frozen=True)
class TicketTask:
    """A ticket-backed task as read: its row, its ticket and the A2A Task."""

    row: A2aTaskRow
    ticket: TicketRecord
    task: Task


def text_message(
    text: str, role: Role, *, context_id: str, task_id: str | None = None, message_id: str = ""
) -> Message:
    """An A2A message of one text part."""
    message = Message(
        message_id=message_id or str(uuid4()),
        context_id=context_id,
        role=role,
        parts=[Part(text=text)],
    )
    if task_id is not None:
        message.task_id = task_id
    return message


def start_task(
    runtime: Runtime, agent: Agent, goal: str, *, context_id: str, params: dict[str, Any]
) -> A2aTaskRow:
    """A new ticket for `agent` with `goal` (and `params`: its limits, anything the agent
    should know), recorded as an A2A task in `context_id`; the ticket scheduler runs it."""
    ticket = service.create_ticket(runtime.db, agent.id, params=params, context={"goal": goal})
    row = A2aTaskRow(ticket.id, agent.id, context_id, None, utcnow())
    try:
        with runtime.db.write() as conn:
            repo.insert_task(conn, row.ticket_id, row.agent_id, row.context_id, row.created_at)
    except Exception:
        service.delete_ticket(runtime.db, ticket.id)  # no ticket the caller cannot see
        raise
    return row


def find_task(runtime: Runtime, task_id: str, agent: Agent) -> A2aTaskRow:
    """The task `task_id` of `agent` (NotFoundError when there is none: no ticket started
    over A2A, or another agent's)."""
    with runtime.db.read() as conn:
        row = repo.task(conn, task_id)
    if row is None or row.agent_id != agent.id:
        raise NotFoundError(f"agent {agent.name} has no task {task_id}")
    return row


def read_task(runtime: Runtime, row: A2aTaskRow, *, history: int | None = None) -> TicketTask:
    """The task as its ticket stands now (`history`: at most that many messages)."""
    ticket = service.get_ticket(runtime.db, row.ticket_id)
    said = (
        session_messages(runtime.db, ticket.current_session_id, limit=HISTORY)
        if ticket.current_session_id
        else []
    )
    state = STATES[ticket.status]
    if row.canceled_by is not None and ticket.status == "failed":
        state = TaskState.TASK_STATE_CANCELED
    last_word = next((m.content for m in reversed(said) if m.role == "assistant"), None)
    status = TaskStatus(state=state, timestamp=_timestamp(ticket))
    note = _status_text(ticket, state, last_word)
    if note:  # the same status reads as the same message (its id too)
        status_id = uuid5(NAMESPACE_URL, f"opencrab:{row.ticket_id}:{state}:{note}")
        status.message.CopyFrom(
            text_message(
                note,
                Role.ROLE_AGENT,
                context_id=row.context_id,
                task_id=row.ticket_id,
                message_id=str(status_id),
            )
        )
    messages = [
        text_message(
            m.content,
            Role.ROLE_USER if m.role == "user" else Role.ROLE_AGENT,
            context_id=row.context_id,
            task_id=row.ticket_id,
            message_id=f"{row.ticket_id}:{m.id}",
        )
        for m in said
        if m.role in ("user", "assistant")
    ]
    if history is not None:
        messages = messages[-history:] if history > 0 else []
    task = Task(
        id=row.ticket_id,
        context_id=row.context_id,
        status=status,
        history=messages,
        metadata=_metadata(ticket, row),
    )
    if state == TaskState.TASK_STATE_COMPLETED and last_word:
        task.artifacts.append(
            Artifact(artifact_id="result", name="result", parts=[Part(text=last_word)])
        )
    return TicketTask(row, ticket, task)


def _status_text(ticket: TicketRecord, state: TaskState, last_word: str | None) -> str | None:
    """What the status says: the question or reason of a waiting ticket, the summary of a
    finished one, the reason of a failed one, the steps of a working one."""
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return last_word or ticket.error_message
    if state == TaskState.TASK_STATE_COMPLETED:
        return last_word
    if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED):
        return ticket.error_message
    if ticket.steps:
        return "\n".join(f"[{s.index}] {s.title} ({s.status})" for s in ticket.steps)
    return None


def _timestamp(ticket: TicketRecord) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(ticket.updated_at)
    return stamp


def _metadata(ticket: TicketRecord, row: A2aTaskRow) -> Struct:
    meta = Struct()
    meta.update(
        {
            "opencrab": {
                "ticketId": ticket.id,
                "sessionId": ticket.current_session_id,
                "ticketStatus": ticket.status,
                "canceledBy": row.canceled_by,
                "steps": [
                    {"index": s.index, "title": s.title, "status": s.status} for s in ticket.steps
                ],
            }
        }
    )
    return meta


async def answer_task(runtime: Runtime, row: A2aTaskRow, text: str, sender: str) -> None:
    """The caller's follow-up message in the task: a person's answer to the ticket's
    session (a suspended ticket resumes; a running one reads it in its next turn). A
    finished task refuses it (ValidationError naming the ticket's status)."""
    ticket = await run_blocking(service.get_ticket, runtime.db, row.ticket_id)
    if ticket.current_session_id is None:
        raise TicketStateError(
            f"task {row.ticket_id} has not started yet; send the answer once it asks"
        )
    # never inside one of its turns; another process's turn there is waited for
    async with hold_turn(runtime.leases, ticket.current_session_id, wait=True):
        await run_blocking(
            service.answer_ticket_session,
            runtime.db,
            ticket.current_session_id,
            text,
            sender_id=sender,
        )


def cancel_task(runtime: Runtime, row: A2aTaskRow, who: str) -> None:
    """Cancel the task: its ticket fails with the reason "canceled over A2A by `who`"
    (a pending one is started and failed at once, so no scheduler runs it) and the row
    records who; TicketStateError when the ticket already ended."""
    reason = CANCELED_REASON.format(who=who)
    with runtime.db.write() as conn:
        ticket = tickets_repo.lock_ticket(conn, row.ticket_id)
        if ticket.status in ("completed", "failed"):
            ended = "canceled" if row.canceled_by is not None else ticket.status
            raise TicketStateError(f"task {row.ticket_id} is already {ended}")
        if ticket.status == "pending":
            service.move_in(conn, row.ticket_id, "start")
        service.move_in(conn, row.ticket_id, "fail", reason)
        repo.mark_canceled(conn, row.ticket_id, who)


def _signature(found: TicketTask) -> tuple[Any, ...]:
    """What a follower compares to tell that a task changed."""
    status = found.task.status
    said = "".join(part.text for part in status.message.parts)
    return (status.state, said, len(found.task.history))


async def follow(
    runtime: Runtime, row: A2aTaskRow, *, poll_secs: float
) -> AsyncIterator[Task | TaskStatusUpdateEvent]:
    """The task, then a status update each time it changes (looked at
    every `poll_secs`), until it waits for the caller or is over: the stream ends there."""
    found = await run_blocking(read_task, runtime, row)
    yield found.task
    seen = _signature(found)
    while found.task.status.state not in SETTLED:
        await asyncio.sleep(poll_secs)
        found = await run_blocking(read_task, runtime, row)
        now = _signature(found)
        if now == seen:
            continue
        seen = now
        yield TaskStatusUpdateEvent(
            task_id=row.ticket_id, context_id=row.context_id, status=found.task.status
        )


async def settle(runtime: Runtime, row: A2aTaskRow, *, poll_secs: float, wait_secs: float) -> Task:
    """The task once it waits for the caller or is over, or as it stands after
    `wait_secs` (still working: the caller polls tasks/get or subscribes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_secs
    found = await run_blocking(read_task, runtime, row)
    while found.task.status.state not in SETTLED and loop.time() < deadline:
        await asyncio.sleep(min(poll_secs, max(deadline - loop.time(), 0)))
        found = await run_blocking(read_task, runtime, row)
    return found.task
