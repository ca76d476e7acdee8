"""The turn recorder: what one engine step writes, in one transaction.

A step's AgentEvents, the agent's memory session lines, the session's chat messages and
the `llm_usage_metrics` rows of its model calls are written together (seed 000's log,
seed 001's memory and metrics and seed 002's messages never disagree), each cut to
`[agent] max_event_bytes` (core/record_cap.py). The router hands a turn's successful
calls to `calls` instead of writing them (CallInfo.records); a call's row is written in
the transaction of the token_usage event naming it, so neither exists without the
other. Calls no event names (a summary the turn did not use) are handed back to the
router's metrics writer by `release`. A reply's events may be *held* and written with
its first store-only call's result, so the two become durable together. `record` runs
the write in a worker thread (opencrab.offload) and returns the session messages it
wrote, with their ids.

Also here: the records a turn builds for the model and the log (token usage sidecars,
tool messages, defused over-deep arguments).

Example:
    recorder = TurnRecorder(db, events, memory, cap, session_id, trace_id, agent, state)
    await recorder.record([event], [recorder.log("speech", text, event.id)], [])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from sqlalchemy.engine import Connection

from opencrab.actions.base import MAX_ARGUMENT_DEPTH, TurnState, nested_too_deep
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.record_cap import cap_event, cap_log, cap_said
from opencrab.core.sessions import Said, queue_messages
from opencrab.core.steps import ActionDone, SessionMessage
from opencrab.event_log import EventLog
from opencrab.events import (
    AgentEvent,
    MessageEvent,
    MessagePayload,
    ReasoningEvent,
    ReasoningPayload,
    TokenUsageDetails,
    TokenUsageEvent,
    TokenUsagePayload,
    ToolCallEvent,
    ToolCallPayload,
    ToolResultEvent,
    ToolResultPayload,
    UserEvent,
    UserPayload,
)
from opencrab.llm.metrics import CallRecord, MetricsRecorder, insert_records
from opencrab.llm.types import ChatResponse, Message, ToolCall
from opencrab.offload import run_blocking
from opencrab.store import Database

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.messages import IncomingMessage

MAX_TOOL_OUTPUT_CHARS = 16_000  # a tool result longer than this is cut for the model


class TurnRecorder:
    """Writes one turn's steps; see the module docstring."""

    def __init__(
        self,
        db: Database,
        events: EventLog,
        memory: MemoryManager,
        max_event_bytes: int,
        session_id: str,
        trace_id: str,
        agent: Agent,
        state: TurnState,
    ) -> None:
        self.db, self.events, self.memory = db, events, memory
        self.max_event_bytes = max_event_bytes
        self.session_id, self.trace_id = session_id, trace_id
        self.agent, self.state = agent, state
        # (trace, type) of events this turn may reference without asking the store
        self.known: dict[str, tuple[str, str]] = {}
        # a reply's events and logs waiting to commit with its first store-only call's result
        self.held: tuple[list[AgentEvent], list[SessionLog]] | None = None
        # a plain-text reply's call, whose usage hangs off the message event that says it
        self.pending_usage: ChatResponse | None = None
        # the metrics rows of the turn's calls, written with their token_usage events
        self.calls: list[CallRecord] = []
        # a read each step's transaction makes too (the fleet's budget caps, for the guard
        # before the next call: core/engine.py), and the function giving the latest one's
        # result (on PostgreSQL the read travels with the commit: no round trip of its own)
        self.read_along: Callable[[Connection], Callable[[], Any]] | None = None
        self.read_result: Callable[[], Any] | None = None

    @cached_property
    def trace_uuid(self) -> UUID:
        """The turn's trace id as a UUID (parsed once: every event of the turn names it)."""
        return UUID(self.trace_id)

    def log(
        self,
        log_type: str,
        content: str,
        event_id: UUID | None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> SessionLog:
        """A memory session line of the agent's, in this turn, naming its event."""
        return SessionLog(
            session_id=self.session_id,
            log_type=log_type,  # type: ignore[arg-type]
            content=content,
            speaker_id=self.agent.id,
            turn_number=self.state.turn_number or None,
            metadata=metadata,
            event_id=None if event_id is None else str(event_id),
        )

    def user_rows(
        self, message: IncomingMessage, *, parent: UUID | None
    ) -> tuple[list[AgentEvent], list[SessionLog], list[Said]]:
        """The message a turn answers: its user event, its memory line (a system line for a
        prompt OpenCrab wrote itself) and its chat message (none for such a prompt)."""
        event = UserEvent(
            id=uuid4(),
            trace_id=self.trace_uuid,
            parent_id=parent,
            timestamp=now(),
            content=UserPayload(text=message.content.text),
            metadata={"source": message.source.kind, "sender": message.sender.id},
        )
        internal = message.source.kind == "internal"
        sender = message.sender
        line = SessionLog(
            session_id=self.session_id,
            log_type="system" if internal else "speech",
            content=message.content.text,
            speaker_id=sender.id,
            turn_number=self.state.turn_number or None,
            event_id=str(event.id),
        )
        said = Said("user", message.content.text, str(event.id), sender.id, sender.name)
        return [event], [line], [] if internal else [said]

    def reply_rows(
        self, reply: ChatResponse, *, parent: UUID | None
    ) -> tuple[list[AgentEvent], list[SessionLog], list[UUID]]:
        """A reply with tool calls as a chain of events: its text as reasoning (with an
        inner_voice line), then one tool_call event per call, the first with the reply's
        token usage (a sidecar, outside the chain); and the tool_call events' ids."""
        batch: list[AgentEvent] = []
        logs: list[SessionLog] = []
        call_events: list[UUID] = []
        if reply.tool_calls and reply.text.strip():
            thought = ReasoningEvent(
                id=uuid4(),
                trace_id=self.trace_uuid,
                parent_id=parent,
                timestamp=now(),
                content=ReasoningPayload(text=reply.text),
            )
            batch.append(thought)
            logs.append(self.log("inner_voice", reply.text, thought.id))
            parent = thought.id
        for index, call in enumerate(reply.tool_calls):
            event = ToolCallEvent(
                id=uuid4(),
                trace_id=self.trace_uuid,
                parent_id=parent,
                timestamp=now(),
                content=ToolCallPayload(name=call.name, arguments=jsonable_arguments(call)),
                metadata={"call_id": call.id},
            )
            batch.append(event)
            if index == 0:
                batch.append(usage_event(reply, event))
            call_events.append(event.id)
            parent = event.id
        return batch, logs, call_events

    def error_rows(
        self, code: str, text: str, *, parent: UUID | None
    ) -> tuple[list[AgentEvent], SessionLog]:
        """The error that ends a turn: a message event `{"kind": "error"}` (with the usage
        of a reply it refuses: an empty reply's call still counts) and its system line."""
        event = MessageEvent(
            id=uuid4(),
            trace_id=self.trace_uuid,
            parent_id=parent,
            timestamp=now(),
            content=MessagePayload(text=text),
            metadata={"kind": "error", "error": code},
        )
        batch: list[AgentEvent] = [event]
        if self.pending_usage is not None:
            batch.append(usage_event(self.pending_usage, event))
            self.pending_usage = None
        line = self.log("system", f"{code}: {text}", event.id, metadata={"error": code})
        return batch, line

    def speech_rows(
        self,
        text: str,
        *,
        via: str,
        parent: UUID | None,
        interrupted: bool = False,
    ) -> tuple[list[AgentEvent], SessionLog, list[Said]]:
        """What the agent said: its message event (a plain-text reply's with its call's
        usage sidecar), its memory speech line and its chat message naming the speaker."""
        usage = self.pending_usage if via == "message" else None
        self.pending_usage = None
        meta: dict[str, Any] = {} if via == "message" else {"via": via}
        if interrupted:
            meta["interrupted"] = True
        event = MessageEvent(
            id=uuid4(),
            trace_id=self.trace_uuid,
            parent_id=parent,
            timestamp=now(),
            content=MessagePayload(text=text),
            metadata=meta or None,
        )
        batch: list[AgentEvent] = [event]
        if usage is not None:
            batch.append(usage_event(usage, event))
        line = SessionLog(
            session_id=self.session_id,
            log_type="speech",
            content=text,
            speaker_id=self.agent.id,
            turn_number=self.state.turn_number or None,
            metadata={"interrupted": True} if interrupted else None,
            event_id=str(event.id),
        )
        said = Said("assistant", text, str(event.id), self.agent.id, self.agent.name, interrupted)
        return batch, line, [said]

    def interrupted(
        self, unanswered: Sequence[tuple[ToolCall, UUID]], partial: str, last: UUID | None
    ) -> tuple[UUID | None, bool]:
        """Record a turn stopped from outside: calls left unanswered get an error result;
        the text streamed so far is kept as the reply, marked interrupted (else a system
        line says so). Returns the last event written and whether `partial` was said."""
        batch: list[AgentEvent] = []
        for call, event_id in unanswered:
            batch.append(
                self.result_event(
                    call, event_id, "interrupted by the user", parent=last, is_error=True
                )
            )
            last = batch[-1].id
        if partial.strip():
            said, line, chat = self.speech_rows(
                partial, via="message", parent=last, interrupted=True
            )
            self.commit([*batch, *said], [line], chat)
            return said[0].id, True
        note = self.log("system", "turn interrupted", None, metadata={"interrupted": True})
        self.commit(batch, [note], [])
        return last, False

    def result_event(
        self,
        call: ToolCall,
        call_event_id: UUID,
        output: str,
        *,
        parent: UUID | None,
        is_error: bool,
    ) -> ToolResultEvent:
        """The result of a tool call, answering its call event."""
        return ToolResultEvent(
            id=uuid4(),
            trace_id=self.trace_uuid,
            parent_id=parent,
            timestamp=now(),
            content=ToolResultPayload(output=output, tool_call_id=call_event_id, is_error=is_error),
            metadata={"call_id": call.id, "name": call.name},
        )

    async def record(
        self,
        batch: Sequence[AgentEvent],
        logs: Sequence[SessionLog],
        chat: list[Said],
        *,
        extra: Callable[[Connection], None] | None = None,
    ) -> list[SessionMessage]:
        """`commit` in a worker thread. The turn's own state (last_event, …) is set
        before it is called: a turn cancelled meanwhile waits for the commit to end
        (run_blocking) and then records its interruption after it."""
        return await run_blocking(self.commit, batch, logs, chat, extra=extra)

    def commit(
        self,
        batch: Sequence[AgentEvent],
        logs: Sequence[SessionLog],
        chat: list[Said],
        *,
        extra: Callable[[Connection], None] | None = None,
    ) -> list[SessionMessage]:
        """Events, memory logs, session messages and metrics rows of one step (and what
        was held), in one transaction; each cut to `[agent] max_event_bytes`. Returns the
        session messages as stored."""
        with self.db.write() as conn:
            stored = self.write(conn, batch, logs, chat, extra=extra)
        return stored()

    def write(
        self,
        conn: Connection,
        batch: Sequence[AgentEvent],
        logs: Sequence[SessionLog],
        chat: list[Said],
        *,
        extra: Callable[[Connection], None] | None = None,
    ) -> Callable[[], list[SessionMessage]]:
        """`commit`'s writes in the caller's write transaction `conn`; call the result once
        it has committed for the session messages as stored (on PostgreSQL their ids, and
        `read_along`'s rows, come with the COMMIT)."""
        if self.held is not None:
            held_batch, held_logs = self.held
            batch, logs = [*held_batch, *batch], [*held_logs, *logs]
            self.held = None
        cap = self.max_event_bytes
        batch = [cap_event(event, cap) for event in batch]
        logs = [cap_log(line, cap) for line in logs]
        chat = [cap_said(said, cap) for said in chat]
        calls = self._calls_named(batch)  # taken out: written here or never
        if batch:
            # fresh ids: a failure fails the step (no savepoint to recover in)
            self.events.append_many(batch, conn=conn, known=self.known, recoverable=False)
        if logs:
            self.memory.append_session_logs(logs, conn=conn)
        # their ids are read after the commit (on PostgreSQL they come with it)
        written = queue_messages(conn, self.session_id, chat)
        if calls:
            insert_records(conn, calls)
        if extra is not None:
            extra(conn)
        read = None if self.read_along is None else self.read_along(conn)

        def stored() -> list[SessionMessage]:
            self.read_result = read
            for event in batch:
                self.known[str(event.id)] = (str(event.trace_id), event.type)
            return [
                SessionMessage(
                    id=message_id,
                    role=said.role,
                    content=said.content,
                    timestamp=at,
                    event_id=said.event_id,
                    speaker_id=said.speaker_id,
                    speaker_name=said.speaker_name,
                    interrupted=said.interrupted,
                )
                for said, (message_id, at) in zip(chat, written(), strict=True)
            ]

        return stored

    def _calls_named(self, batch: Sequence[AgentEvent]) -> list[CallRecord]:
        """The turn's call records whose token_usage event is in `batch`."""
        named = {
            event.metadata.get("metrics_id")
            for event in batch
            if isinstance(event, TokenUsageEvent) and event.metadata
        }
        if not named or not self.calls:
            return []
        taken = [call for call in self.calls if call.id in named]
        self.calls[:] = [call for call in self.calls if call.id not in named]
        return taken

    def release(self, metrics: MetricsRecorder | None) -> None:
        """Hand the calls no event named to the router's metrics writer (queued there)."""
        calls = list(self.calls)
        self.calls.clear()
        if metrics is not None:
            for call in calls:
                metrics.record(call)


def usage_event(reply: ChatResponse, parent: ToolCallEvent | MessageEvent) -> TokenUsageEvent:
    """The TokenUsage sidecar of a model call, hanging off the event it produced."""
    usage = reply.usage
    details = None
    if usage.cache_read_tokens or usage.reasoning_tokens:
        details = TokenUsageDetails(
            cache_read_input_tokens=usage.cache_read_tokens or None,
            reasoning_output_tokens=usage.reasoning_tokens or None,
        )
    return TokenUsageEvent(
        id=uuid4(),
        trace_id=parent.trace_id,
        parent_id=parent.id,
        timestamp=now(),
        content=TokenUsagePayload(
            input_tokens=min(usage.input_tokens, 2**31 - 1),
            output_tokens=min(usage.output_tokens, 2**31 - 1),
            total_tokens=min(usage.total_tokens, 2**31 - 1),
            details=details,
        ),
        metadata={
            "provider": reply.provider,
            "model": reply.model,
            "metrics_id": reply.metrics_id,
            "cost_usd": reply.cost_usd,
        },
    )


def defused(call: ToolCall) -> ToolCall:
    """The call with over-deep arguments kept as text only: the registry refuses it, and
    nothing records or sends on a structure no serialiser can walk."""
    if not nested_too_deep(call.arguments):
        return call
    text = call.raw_arguments
    if text is None:
        try:
            text = json.dumps(call.arguments, ensure_ascii=False)
        except RecursionError:
            text = f"(arguments nested more than {MAX_ARGUMENT_DEPTH} levels deep)"
    return ToolCall(id=call.id, name=call.name, arguments=text, raw_arguments=text)


def jsonable_arguments(call: ToolCall) -> Any:
    """A call's arguments as recorded: the parsed object, else the text the model sent."""
    if call.raw_arguments is not None and not isinstance(call.arguments, dict):
        return call.raw_arguments
    return call.arguments


def tool_message(call: ToolCall, done: ActionDone) -> Message:
    """The model's view of a call's result."""
    output = clip_output(done.result.output())
    return Message.tool(call.id, output, name=call.name, is_error=not done.result.success)


def clip_output(text: str) -> str:
    """A tool result cut to MAX_TOOL_OUTPUT_CHARS for the model, saying how much was cut."""
    if len(text) <= MAX_TOOL_OUTPUT_CHARS:
        return text
    cut = len(text) - MAX_TOOL_OUTPUT_CHARS
    return text[:MAX_TOOL_OUTPUT_CHARS] + f"\n…({cut} characters cut)"


def now() -> datetime:
    """The time a record is made (UTC)."""
    return datetime.now(UTC)
