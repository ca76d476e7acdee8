"""The turn recorder: what one engine step writes, in one transaction.

A step's AgentEvents, the agent's memory session lines, the session's chat messages and
the `llm_usage_metrics` rows of its model calls are written together (seed 000's log,
seed 001's memory and metrics and seed 002's messages never disagree), each cut to
`[agent] max_event_bytes` (core/record_cap.py). The router hands a turn's successful
calls to `calls` instead of writing them (CallInfo.records); a call's row is written in
the transaction of the token_usage event naming it, so neither exists without the
other. Calls no event names (a summary the turn did not use) are handed back to the
router's metrics writer by the turn's budget gate (`unnamed_calls`, core/turn_budget.py).
A reply's events may be *held* and written with its first store-only call's result, so
the two become durable together. The recorder's own records are trusted: its events are
plain `Record`s (no AgentEvent validation) that go straight to their rows
(event_log.event_row, the one encoder), since the chain rules
EventLog checks for events from outside (parents, tool_call ids) hold by construction;
its memory lines are plain `Line`s encoded to their rows here. Validation is for what
comes in: model replies, tool arguments (the registry), API bodies.

The recorder owns the turn's event chain: `last` is the newest event of the trace, the
parent of the next one; each record the turn makes is one call here (`user`, `reply`,
`result`, `refused`, `error`, `speech`, `compaction`, `note`), which chains its events
after `last` and moves `last` on before it writes (so a turn cancelled during the write
records its interruption after the right event). Each runs its write in a worker thread
(opencrab.offload) and returns what the turn needs of it (ids, session messages).

Also here: the records a turn builds for the model and the log (token usage sidecars,
tool messages, defused over-deep arguments).

Example:
    recorder = TurnRecorder(db, events, memory, cap, session_id, trace_id, agent, state)
    recorder.continue_chain()  # after the trace's newest stored event
    await recorder.user(message)
    spoke = await recorder.speech("hello", via="message")
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID, uuid4

from sqlalchemy.engine import Connection

from opencrab.actions.base import MAX_ARGUMENT_DEPTH, ActionResult, TurnState, nested_too_deep
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.record_cap import cap_payload, cap_said, cut_text
from opencrab.core.sessions import Said, queue_messages
from opencrab.core.steps import ActionDone, SessionMessage, Spoke
from opencrab.event_log import EventLog, EventRow, event_row
from opencrab.events import (
    MessageEvent,
    MessagePayload,
    Payload,
    ReasoningPayload,
    TokenUsageDetails,
    TokenUsagePayload,
    ToolCallPayload,
    ToolResultPayload,
    UserPayload,
)
from opencrab.llm.metrics import CallRecord, insert_records
from opencrab.llm.types import ChatResponse, ImagePart, Message, TextPart, ToolCall
from opencrab.offload import run_blocking
from opencrab.store import Database
from opencrab.store.repositories import events as events_repo
from opencrab.store.repositories import memory as memory_repo
from opencrab.store.types import format_timestamp

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.messages import IncomingMessage

HERE_MAX_ROWS = 64
"""A step with more events and memory lines than this is written in a worker thread."""
MAX_TOOL_OUTPUT_CHARS = 16_000  # a tool result longer than this is cut for the model


@dataclass(slots=True)
class Record:
    """An AgentEvent the recorder makes, in the turn's trace: its own records are plain
    values (their payloads are the seed-000 payload models the one encoder writes,
    event_log.event_row), since the rules an AgentEvent's validation checks (a UUID id
    and parent, an aware UTC time) hold by construction here."""

    id: UUID
    parent_id: UUID | None
    timestamp: datetime
    content: Payload
    metadata: Any = None


@dataclass(slots=True)
class Line:
    """A memory session line the recorder makes (SessionLog's fields): its own records
    are built unvalidated and encoded straight to their row (`_log_rows`)."""

    session_id: str
    log_type: str
    content: str
    speaker_id: str | None = None
    turn_number: int | None = None
    metadata: dict[str, Any] | None = None
    event_id: str | None = None


LogLine = Line | SessionLog
"""A line a step writes: the recorder's own, or one an action or compaction made."""

Stored = Callable[[], list[SessionMessage]]
"""Given once a step's transaction has committed: its session messages as stored."""


class ReadAlong(Protocol):
    """A read each step's transaction makes too (the fleet's budget caps, for the check
    before the next call: core/turn_budget.py); on PostgreSQL it travels with the COMMIT.
    The turn's last step (`final`: no call comes after it) leaves it out."""

    def queue(self, conn: Connection) -> Callable[[], Any]: ...

    def landed(self, read: Callable[[], Any]) -> None: ...


class TurnRecorder:
    """Writes one turn's steps and keeps its event chain; see the module docstring."""

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
        read_along: ReadAlong | None = None,
    ) -> None:
        self.db, self.events, self.memory = db, events, memory
        self.max_event_bytes = max_event_bytes
        self.session_id, self.trace_id = session_id, trace_id
        self.agent, self.state = agent, state
        self.read_along = read_along
        self.last: UUID | None = None  # the chain's newest event: the next one's parent
        self.turn_id = ""  # the id of the turn's user event
        # the latest reply's calls with no result recorded yet (and their events' ids)
        self.unanswered: list[tuple[ToolCall, UUID]] = []
        # a reply's events and logs waiting to commit with its first store-only call's result
        self.held: tuple[list[Record], list[LogLine]] | None = None
        # a plain-text reply's call, whose usage hangs off the message event that says it
        self.pending_usage: ChatResponse | None = None
        # the metrics rows of the turn's calls, written with their token_usage events
        self.calls: list[CallRecord] = []

    @cached_property
    def trace_uuid(self) -> UUID:
        """The turn's trace id as a UUID (parsed once: every event of the turn names it)."""
        return UUID(self.trace_id)

    def continue_chain(self) -> UUID | None:
        """Start the chain after the trace's newest stored event (None: a new trace); read
        in the caller's snapshot."""
        self.last = self.events.last_id(self.trace_id)
        return self.last

    def log(
        self,
        log_type: str,
        content: str,
        event_id: UUID | None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Line:
        """A memory session line of the agent's, in this turn, naming its event."""
        return Line(
            self.session_id,
            log_type,
            content,
            self.agent.id,
            self.state.turn_number or None,
            metadata,
            None if event_id is None else str(event_id),
        )

    # ------------------------------------------------------------ one call per record
    def user_in(self, conn: Connection, message: IncomingMessage) -> Stored:
        """The message a turn answers, written in the caller's write transaction `conn`
        (see `write`): its user event, its memory line (a system line for a prompt OpenCrab
        wrote itself) and its chat message (none for such a prompt)."""
        return self.write(conn, *self._user_rows(message))

    async def user(self, message: IncomingMessage) -> list[SessionMessage]:
        """`user_in` in a transaction of its own (after a compaction)."""
        return await self.record(*self._user_rows(message))

    async def compaction(
        self, event: MessageEvent, note: LogLine, reply: ChatResponse | None
    ) -> None:
        """A compaction summary chained after `last` (with its model call's usage)."""
        record = Record(event.id, event.parent_id, event.timestamp, event.content, event.metadata)
        batch = [record]
        if reply is not None:
            batch.append(usage_event(reply, record))
        self.last = event.id
        await self.record(batch, [note], [])

    async def reply(self, reply: ChatResponse, *, hold: bool) -> list[UUID]:
        """A model reply; returns its tool_call events' ids. With tool calls: its text as
        reasoning (with an inner_voice line), one tool_call event per call, the first with
        the reply's token usage (a sidecar, outside the chain); with `hold` these wait to
        be written with the next record (its first store-only call's result). A plain-text
        reply writes nothing yet: its usage hangs off the event that says it or refuses it."""
        batch, logs, call_events = self._reply_rows(reply)
        self.unanswered = list(zip(reply.tool_calls, call_events, strict=True))
        if batch and hold:
            self.held = (batch, logs)
        elif batch:
            await self.record(batch, logs, [])
        if not reply.tool_calls:
            self.pending_usage = reply
        return call_events

    async def result(
        self,
        call: ToolCall,
        call_event_id: UUID,
        outcome: ActionResult,
        *,
        logs: Sequence[LogLine] = (),
        speech: str | None = None,
        extra: Callable[[Connection], None] | None = None,
        final: bool = False,
    ) -> tuple[UUID, Spoke | None]:
        """A call's result: its tool_result event and action line (with the action's own
        `logs` and writes, `extra`), and a turn-ending `speech` it made, in one step
        (`final`: the call ends the turn). Returns the result event's id and the speech
        as said."""
        output = outcome.output()
        self.unanswered = [(c, e) for c, e in self.unanswered if e != call_event_id]
        event = self._result_event(
            call, call_event_id, output, is_error=not outcome.success, facts=outcome.metadata
        )
        line = self.log(
            "action",
            f"{call.name}: {output[:500]}",
            event.id,
            metadata={
                "action": call.name,
                "success": outcome.success,
                "turn": self.turn_id,
                "metrics_id": self.state.last_metrics_id,
            },
        )
        batch: list[Record] = [event]
        lines = [line, *logs]
        chat: list[Said] = []
        said: list[Record] = []
        if speech is not None:
            said, said_line, chat = self._speech_rows(speech, via=call.name)
            batch += said
            lines.append(said_line)
        stored = await self.record(batch, lines, chat, extra=extra, final=final)
        if speech is None:
            return event.id, None
        return event.id, Spoke(speech, call.name, str(said[0].id), next(iter(stored), None))

    async def refused(
        self,
        calls: Sequence[tuple[ToolCall, UUID]],
        output: str,
        note: LogLine,
        *,
        extra: Callable[[Connection], None] | None = None,
    ) -> list[UUID]:
        """The reply's last calls settled unrun, in one step: `calls` answered with the
        error `output` (any other still open is held for a person), a system `note` saying
        why and `extra`'s writes. Returns the result events' ids."""
        self.unanswered = []
        batch = [self._result_event(c, event_id, output, is_error=True) for c, event_id in calls]
        await self.record(batch, [note], [], extra=extra)
        return [event.id for event in batch]

    async def error(self, code: str, text: str) -> UUID:
        """The error that ends a turn: a message event `{"kind": "error"}` (with the usage
        of a reply it refuses: an empty reply's call still counts) and its system line."""
        event = self._chained(MessagePayload(text=text), {"kind": "error", "error": code})
        batch: list[Record] = [event]
        if self.pending_usage is not None:
            batch.append(usage_event(self.pending_usage, event))
            self.pending_usage = None
        line = self.log("system", f"{code}: {text}", event.id, metadata={"error": code})
        await self.record(batch, [line], [], final=True)
        return event.id

    async def speech(self, text: str, *, via: str) -> Spoke:
        """What the agent said (ending the turn): a message event, a speech line, a
        session message."""
        batch, line, chat = self._speech_rows(text, via=via)
        stored = await self.record(batch, [line], chat, final=True)
        return Spoke(text, via, str(batch[0].id), next(iter(stored), None))

    async def note(self, content: str) -> None:
        """A system line of the turn's own, naming no event (e.g. why the loop stopped)."""
        line = Line(self.session_id, "system", content, None, self.state.turn_number or None)
        await self.record([], [line], [], final=True)

    def interrupted(self, partial: str) -> bool:
        """Record a turn stopped from outside: calls left unanswered get an error result;
        the text streamed so far is kept as the reply, marked interrupted (else a system
        line says so). Runs on the caller's thread; True when `partial` was said."""
        unanswered, self.unanswered = self.unanswered, []
        batch: list[Record] = [
            self._result_event(call, event_id, "interrupted by the user", is_error=True)
            for call, event_id in unanswered
        ]
        if partial.strip():
            said, line, chat = self._speech_rows(partial, via="message", interrupted=True)
            self.commit([*batch, *said], [line], chat, final=True)
            return True
        note = self.log("system", "turn interrupted", None, metadata={"interrupted": True})
        self.commit(batch, [note], [], final=True)
        return False

    # ------------------------------------------------------------ the chained rows
    def _chained(self, content: Payload, metadata: Any = None) -> Record:
        """A new event of the turn after `last`, which it becomes."""
        event = Record(uuid4(), self.last, now(), content, metadata)
        self.last = event.id
        return event

    def _user_rows(
        self, message: IncomingMessage
    ) -> tuple[list[Record], list[LogLine], list[Said]]:
        event = self._chained(
            UserPayload(text=message.content.text),
            {"source": message.source.kind, "sender": message.sender.id},
        )
        self.turn_id = str(event.id)
        internal = message.source.kind == "internal"
        sender = message.sender
        line = Line(
            self.session_id,
            "system" if internal else "speech",
            message.content.text,
            sender.id,
            self.state.turn_number or None,
            None,
            str(event.id),
        )
        said = Said("user", message.content.text, str(event.id), sender.id, sender.name)
        return [event], [line], [] if internal else [said]

    def _reply_rows(self, reply: ChatResponse) -> tuple[list[Record], list[LogLine], list[UUID]]:
        batch: list[Record] = []
        logs: list[LogLine] = []
        call_events: list[UUID] = []
        if reply.tool_calls and reply.text.strip():
            thought = self._chained(ReasoningPayload(text=reply.text))
            batch.append(thought)
            logs.append(self.log("inner_voice", reply.text, thought.id))
        for index, call in enumerate(reply.tool_calls):
            event = self._chained(
                ToolCallPayload(name=call.name, arguments=jsonable_arguments(call)),
                {"call_id": call.id},
            )
            batch.append(event)
            if index == 0:
                batch.append(usage_event(reply, event))
            call_events.append(event.id)
        return batch, logs, call_events

    def _speech_rows(
        self, text: str, *, via: str, interrupted: bool = False
    ) -> tuple[list[Record], LogLine, list[Said]]:
        usage = self.pending_usage if via == "message" else None
        self.pending_usage = None
        meta: dict[str, Any] = {} if via == "message" else {"via": via}
        if interrupted:
            meta["interrupted"] = True
        event = self._chained(MessagePayload(text=text), meta or None)
        batch: list[Record] = [event]
        if usage is not None:
            batch.append(usage_event(usage, event))
        line = Line(
            self.session_id,
            "speech",
            text,
            self.agent.id,
            self.state.turn_number or None,
            {"interrupted": True} if interrupted else None,
            str(event.id),
        )
        said = Said("assistant", text, str(event.id), self.agent.id, self.agent.name, interrupted)
        return batch, line, [said]

    def _result_event(
        self,
        call: ToolCall,
        call_event_id: UUID,
        output: str,
        *,
        is_error: bool,
        facts: dict[str, Any] | None = None,
    ) -> Record:
        """A call's tool_result event; `facts` (ActionResult.metadata: a remote agent's
        latency and cost) join its metadata."""
        return self._chained(
            ToolResultPayload(output=output, tool_call_id=call_event_id, is_error=is_error),
            {**(facts or {}), "call_id": call.id, "name": call.name},
        )

    # ------------------------------------------------------------ the writes
    async def record(
        self,
        batch: Sequence[Record],
        logs: Sequence[LogLine],
        chat: list[Said],
        *,
        extra: Callable[[Connection], None] | None = None,
        final: bool = False,
    ) -> list[SessionMessage]:
        """`commit` through Database.run (a worker thread, or the caller's on SQLite when
        the write lock is free); a step of more than HERE_MAX_ROWS records (a reply of a
        thousand calls) in a worker thread, as SQLite gives the interpreter up while it
        writes there. The chain (`last`) has moved on before it is called: a
        turn cancelled meanwhile waits for the commit to end and then records its
        interruption after it."""
        rows = len(batch) + len(logs) + (len(self.held[0]) if self.held is not None else 0)
        if rows > HERE_MAX_ROWS:  # its writes would hold the event loop: a thread waits
            return await run_blocking(self.commit, batch, logs, chat, extra=extra, final=final)
        return await self.db.run(self.commit, batch, logs, chat, extra=extra, final=final)

    def commit(
        self,
        batch: Sequence[Record],
        logs: Sequence[LogLine],
        chat: list[Said],
        *,
        extra: Callable[[Connection], None] | None = None,
        final: bool = False,
    ) -> list[SessionMessage]:
        """Events, memory logs, session messages and metrics rows of one step (and what
        was held), in one transaction; each cut to `[agent] max_event_bytes`. Returns the
        session messages as stored. `final`: the turn's last step (no read along)."""
        with self.db.write() as conn:
            stored = self.write(conn, batch, logs, chat, extra=extra, final=final)
        return stored()

    def write(
        self,
        conn: Connection,
        batch: Sequence[Record],
        logs: Sequence[LogLine],
        chat: list[Said],
        *,
        extra: Callable[[Connection], None] | None = None,
        final: bool = False,
    ) -> Stored:
        """`commit`'s writes in the caller's write transaction `conn`; call the result once
        it has committed for the session messages as stored (on PostgreSQL their ids, and
        `read_along`'s rows, come with the COMMIT; the `final` step reads none)."""
        if self.held is not None:
            held_batch, held_logs = self.held
            batch, logs = [*held_batch, *batch], [*held_logs, *logs]
            self.held = None
        cap = self.max_event_bytes
        batch = [_capped(event, cap) for event in batch]
        chat = [cap_said(said, cap) for said in chat]
        calls = self._calls_named(batch)  # taken out: written here or never
        if batch:
            # fresh ids: a failure fails the step (no savepoint to recover in)
            events_repo.insert(conn, self._event_rows(batch))
        if logs:
            memory_repo.append_log_rows(conn, self._log_rows(logs, cap))
        # their ids are read after the commit (on PostgreSQL they come with it)
        written = queue_messages(conn, self.session_id, chat)
        if extra is not None:
            extra(conn)
        along = self.read_along
        read = None if along is None or final else along.queue(conn)
        if calls:  # last: the daily rollup rows every turn's calls add to are locked
            insert_records(conn, calls)  # until the commit, which comes right after

        def stored() -> list[SessionMessage]:
            if along is not None and read is not None:
                along.landed(read)
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

    def _event_rows(self, batch: Sequence[Record]) -> list[EventRow]:
        """The events' stored rows, encoded by the one encoder (event_log.event_row); the
        chain rules EventLog checks for events from outside hold here by construction."""
        trace = self._trace_text
        return [
            event_row(
                str(event.id),
                trace,
                None if event.parent_id is None else str(event.parent_id),
                format_timestamp(event.timestamp),
                event.content,
                event.metadata,
            )
            for event in batch
        ]

    def _log_rows(self, logs: Sequence[LogLine], cap: int) -> list[tuple[Any, ...]]:
        """The lines' stored rows (LOG_COLUMNS order), each cut to `cap` bytes; in the
        agent's memory (MemoryManager.append_session_logs' rows)."""
        agent_id, at = self.agent.id, datetime.now(UTC)
        return [
            (
                agent_id,
                line.session_id,
                line.log_type,
                cut_text(line.content, cap)[0],
                line.speaker_id,
                line.turn_number,
                line.metadata,
                line.event_id,
                at,
            )
            for line in logs
        ]

    @cached_property
    def _trace_text(self) -> str:
        return str(self.trace_uuid)

    def _calls_named(self, batch: Sequence[Record]) -> list[CallRecord]:
        """The turn's call records whose token_usage event is in `batch`."""
        named = {
            event.metadata.get("metrics_id")
            for event in batch
            if isinstance(event.content, TokenUsagePayload) and event.metadata
        }
        if not named or not self.calls:
            return []
        taken = [call for call in self.calls if call.id in named]
        self.calls[:] = [call for call in self.calls if call.id not in named]
        return taken

    def unnamed_calls(self) -> list[CallRecord]:
        """Take the turn's calls no event named (for the router's metrics writer)."""
        calls = list(self.calls)
        self.calls.clear()
        return calls


def _capped(event: Record, max_bytes: int) -> Record:
    """The event as it may be stored (core/record_cap.py)."""
    capped = cap_payload(event.content, event.metadata, max_bytes)
    if capped is None:
        return event
    return Record(event.id, event.parent_id, event.timestamp, *capped)


def usage_event(reply: ChatResponse, parent: Record) -> Record:
    """The TokenUsage sidecar of a model call, hanging off the event it produced."""
    usage = reply.usage
    details = None
    if usage.cache_read_tokens or usage.reasoning_tokens:
        details = TokenUsageDetails(
            cache_read_input_tokens=usage.cache_read_tokens or None,
            reasoning_output_tokens=usage.reasoning_tokens or None,
        )
    return Record(
        uuid4(),
        parent.id,
        now(),
        TokenUsagePayload(
            input_tokens=min(usage.input_tokens, 2**31 - 1),
            output_tokens=min(usage.output_tokens, 2**31 - 1),
            total_tokens=min(usage.total_tokens, 2**31 - 1),
            details=details,
        ),
        {
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
    """The model's view of a call's result (with its images, e.g. an MCP tool's, for a
    provider that shows images in a tool result; the others read the text)."""
    output = clip_output(done.result.output())
    failed = not done.result.success
    if not done.result.images:
        return Message.tool(call.id, output, name=call.name, is_error=failed)
    parts: list[TextPart | ImagePart] = [TextPart(text=output)]
    parts += [ImagePart(url=url) for url in done.result.images]
    return Message(
        role="tool", content=list(parts), tool_call_id=call.id, name=call.name, is_error=failed
    )


def clip_output(text: str) -> str:
    """A tool result cut to MAX_TOOL_OUTPUT_CHARS for the model, saying how much was cut."""
    if len(text) <= MAX_TOOL_OUTPUT_CHARS:
        return text
    cut = len(text) - MAX_TOOL_OUTPUT_CHARS
    return text[:MAX_TOOL_OUTPUT_CHARS] + f"\n…({cut} characters cut)"


def now() -> datetime:
    """The time a record is made (UTC)."""
    return datetime.now(UTC)
