"""The AgentEvent log on the store: validated appends, traces, context and token totals.

Rules checked before anything is written (seed 000):
- ids are unique (within the batch and against the store);
- `parent_id` is null (a root) or names an event of the same trace that is already
  stored or comes earlier in the batch — so the chain can never loop (`chain_order`
  puts a batch given in any order into that order first, and names any cycle);
- a token_usage event's parent is a tool_call or a message;
- a tool_result's `tool_call_id` names a tool_call of the same trace.
A batch that breaks any rule writes nothing; EventValidationError lists every problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import orjson
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from opencrab.errors import EventValidationError
from opencrab.events import (
    EVENT_ADAPTER,
    GENERATION_TYPES,
    PAYLOAD_TYPES,
    AgentEvent,
    Payload,
    ToolResultEvent,
    ToolResultPayload,
)
from opencrab.store import Database
from opencrab.store.bulk import paused_gc
from opencrab.store.repositories import events as events_repo
from opencrab.store.repositories.events import COLUMNS, EventRow, StoredEvent
from opencrab.store.types import format_timestamp

__all__ = ["COLUMNS", "EventLog", "EventRow", "chain_order", "event_row", "row_json"]


@dataclass
class TokenCount:
    """Tokens of one generation event, or of a whole trace."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_input_tokens: int = 0
    reasoning_output_tokens: int = 0

    def add(self, usage: dict[str, Any]) -> None:
        self.input_tokens += usage["input_tokens"]
        self.output_tokens += usage["output_tokens"]
        self.total_tokens += usage["total_tokens"]
        details = usage.get("details") or {}
        self.cache_read_input_tokens += details.get("cache_read_input_tokens") or 0
        self.reasoning_output_tokens += details.get("reasoning_output_tokens") or 0


@dataclass
class TokenTotals:
    """Token totals of a trace, and per generation event (the token_usage parents)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    by_event: dict[str, TokenCount] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """`{"input_tokens", "output_tokens", "total_tokens", "by_event": {id: {...}}}`."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "by_event": {k: vars(v) for k, v in self.by_event.items()},
        }


class EventLog:
    """Append and read AgentEvents.

    Example:
        log = EventLog(db)
        log.append_many([user, reasoning, call, usage, result])
        [e.type for e in log.trace(trace_id)]
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ writing
    def append(self, event: AgentEvent, *, conn: Connection | None = None) -> None:
        """Validate and store one event."""
        self.append_many([event], conn=conn)

    def append_many(
        self,
        batch: Sequence[AgentEvent],
        *,
        conn: Connection | None = None,
        known: Mapping[str, tuple[str, str]] | None = None,
        recoverable: bool = True,
    ) -> int:
        """Validate and store a batch in one transaction; returns the number written.

        Pass `conn` to write inside a transaction the caller already holds (so events
        commit together with other rows of the same step). `known` maps ids of events
        the caller wrote itself (committed earlier) to (trace id, type): references to
        them are checked against it instead of the store. `recoverable=False`: the
        caller gives up its whole transaction when the insert fails, so an id already
        stored raises the store's IntegrityError (on PostgreSQL possibly only at the
        commit) instead of EventValidationError, and no savepoint is spent on it.
        """
        if not batch:
            return 0
        if conn is not None:
            self._append(conn, batch, known, recoverable)
        else:
            with self.db.write() as own:
                self._append(own, batch, known, recoverable)
        return len(batch)

    def _append(
        self,
        conn: Connection,
        batch: Sequence[AgentEvent],
        known: Mapping[str, tuple[str, str]] | None,
        recoverable: bool,
    ) -> None:
        def lookup(ids: set[str]) -> dict[str, tuple[str, str]]:
            if not known:
                return events_repo.lookup(conn, ids)
            found = {i: known[i] for i in ids if i in known}
            rest = ids - found.keys()
            return {**found, **events_repo.lookup(conn, rest)} if rest else found

        try:
            with paused_gc():
                rows = _validate(batch, lookup)
                events_repo.insert(conn, rows, undoable=recoverable)
        except sa.exc.IntegrityError:
            taken = events_repo.lookup(conn, {str(e.id) for e in batch})
            problems = [
                (i, str(e.id), "id already exists in the store")
                for i, e in enumerate(batch)
                if str(e.id) in taken
            ]
            if not problems:
                raise
            raise EventValidationError(problems) from None

    # ------------------------------------------------------------------ reading
    def trace(self, trace_id: UUID | str) -> list[AgentEvent]:
        """Every event of the trace, ordered along the parent chain.

        Depth-first from each root; siblings in the order they were recorded, so a
        token_usage sidecar follows its tool_call or message directly.
        """
        with self.db.read() as conn:
            rows = events_repo.trace_rows(conn, str(trace_id))
        return [_row_event(row) for row in _chain_order(rows)]

    def last_id(self, trace_id: UUID | str, *, conn: Connection | None = None) -> UUID | None:
        """The id of the trace's most recently written event, None for a new trace."""
        if conn is not None:
            found = events_repo.last_id(conn, str(trace_id))
        else:
            with self.db.read() as own:
                found = events_repo.last_id(own, str(trace_id))
        return None if found is None else UUID(found)

    def context(self, trace_id: UUID | str) -> list[AgentEvent]:
        """The trace as LLM history: every event but the token_usage sidecars."""
        return [e for e in self.trace(trace_id) if e.is_context_event]

    def exists(self, trace_id: UUID | str) -> bool:
        """True when the trace has at least one event."""
        with self.db.read() as conn:
            return events_repo.exists(conn, str(trace_id))

    def token_totals(self, trace_id: UUID | str) -> TokenTotals:
        """Sum of the trace's token_usage events, in total and per parent event."""
        with self.db.read() as conn:
            rows = events_repo.token_usage(conn, str(trace_id))
        totals = TokenTotals()
        for parent_id, content in rows:
            usage = orjson.loads(content)
            totals.input_tokens += usage["input_tokens"]
            totals.output_tokens += usage["output_tokens"]
            totals.total_tokens += usage["total_tokens"]
            totals.by_event.setdefault(parent_id, TokenCount()).add(usage)
        return totals


def event_row(
    event_id: str,
    trace_id: str,
    parent_id: str | None,
    timestamp: str,
    content: Payload,
    metadata: Any = None,
) -> EventRow:
    """The stored row of one event: the one encoder of AgentEvents, whoever writes them
    (the event log's appends, the turn recorder, the transcript importer's bulk rows).

    `timestamp` is in storage form (`format_timestamp`); the type and a tool_result's
    `tool_call_id` come from the payload (a seed-000 payload model), which is serialised
    by its own pydantic serializer; metadata is any JSON value (None: absent).
    """
    kind, to_json = _ENCODERS[type(content)]
    # tuple.__new__: an EventRow without NamedTuple's Python-level __new__ (hot path)
    return tuple.__new__(
        EventRow,
        (
            event_id,
            trace_id,
            parent_id,
            kind,
            timestamp,
            to_json(content).decode(),
            None if metadata is None else orjson.dumps(metadata).decode(),
            str(content.tool_call_id) if isinstance(content, ToolResultPayload) else None,
        ),
    )


_ENCODERS: dict[type[BaseModel], tuple[str, Callable[[Any], bytes]]] = {
    payload: (kind, payload.__pydantic_serializer__.to_json)
    for payload, kind in PAYLOAD_TYPES.items()
}
"""Each seed-000 payload type's event type and its pydantic serializer's `to_json`."""


def _validate(batch: Sequence[AgentEvent], lookup: Any) -> list[EventRow]:
    """Check every rule; return the rows to insert (COLUMNS order), or raise listing all."""
    # UUID's __str__, __hash__ and __eq__ are Python code; key by the int and
    # stringify each distinct UUID once
    text: dict[int, str] = {e.id.int: str(e.id) for e in batch}

    def as_text(value: UUID) -> str:
        key = value.int
        found = text.get(key)
        if found is None:
            found = text[key] = str(value)
        return found

    ids = [text[e.id.int] for e in batch]
    batch_ids = set(ids)
    referenced: set[str] = set()
    for e in batch:
        if e.parent_id is not None:
            referenced.add(as_text(e.parent_id))
        if isinstance(e, ToolResultEvent):
            referenced.add(as_text(e.content.tool_call_id))
    outside = referenced - batch_ids
    stored: dict[str, tuple[str, str]] = lookup(outside) if outside else {}

    seen: dict[str, tuple[str, str]] = {}  # id -> (trace, type) of valid events so far
    problems: list[tuple[int, str | None, str]] = []
    rows: list[EventRow] = []

    def missing(ref: str, event_id: str, what: str) -> str:
        if ref == event_id:
            return f"{what} {ref} is the event itself"
        if ref in batch_ids:
            return f"{what} {ref} comes later in the batch or is invalid; it must come first"
        return f"{what} {ref} does not exist"

    for index, event in enumerate(batch):
        event_id = ids[index]
        trace = as_text(event.trace_id)
        kind = event.type
        before = len(problems)
        if event_id in seen:
            problems.append((index, event_id, "duplicate id in the batch"))
        parent_id = None
        if event.parent_id is not None:
            parent_id = as_text(event.parent_id)
            parent = seen.get(parent_id) or stored.get(parent_id)
            if parent is None:
                problems.append((index, event_id, missing(parent_id, event_id, "parent")))
            elif parent[0] != trace:
                problems.append(
                    (index, event_id, f"parent {parent_id} belongs to trace {parent[0]}")
                )
            elif kind == "token_usage" and parent[1] not in GENERATION_TYPES:
                problems.append(
                    (
                        index,
                        event_id,
                        f"a token_usage parent must be a tool_call or message, not a {parent[1]}",
                    )
                )
        elif kind == "token_usage":
            problems.append(
                (index, event_id, "a token_usage event needs a tool_call or message parent")
            )
        tool_call_id = None
        if isinstance(event, ToolResultEvent):
            tool_call_id = as_text(event.content.tool_call_id)
            call = seen.get(tool_call_id) or stored.get(tool_call_id)
            if call is None:
                problems.append((index, event_id, missing(tool_call_id, event_id, "tool_call_id")))
            elif call[0] != trace:
                problems.append(
                    (index, event_id, f"tool_call_id {tool_call_id} belongs to trace {call[0]}")
                )
            elif call[1] != "tool_call":
                problems.append(
                    (
                        index,
                        event_id,
                        f"tool_call_id {tool_call_id} names a {call[1]}, not a tool_call",
                    )
                )
        if len(problems) == before and event_id not in seen:
            seen[event_id] = (trace, kind)
            if not problems:
                rows.append(
                    event_row(
                        event_id,
                        trace,
                        parent_id,
                        format_timestamp(event.timestamp),
                        event.content,
                        event.metadata,
                    )
                )
    if problems:
        raise EventValidationError(problems)
    return rows


def chain_order(batch: Sequence[AgentEvent]) -> tuple[list[int], list[tuple[int, str, str]]]:
    """The batch's indices in an order `append_many` accepts, and the events in a cycle.

    Each event comes after its parent and, for a tool_result, after the tool_call it
    names, when those are in the batch; otherwise the input order is kept. An event whose
    references lead back to itself is left out and reported as (index, id, reason).
    """
    first: dict[int, int] = {}
    for index, event in enumerate(batch):
        first.setdefault(event.id.int, index)

    def references(index: int) -> list[tuple[str, UUID]]:
        event = batch[index]
        found = [] if event.parent_id is None else [("parent", event.parent_id)]
        if isinstance(event, ToolResultEvent):
            found.append(("tool_call_id", event.content.tool_call_id))
        return found

    def needs(index: int) -> list[int]:
        wanted = (first.get(ref.int) for _, ref in references(index))
        return [i for i in wanted if i is not None and i != index]

    state = [0] * len(batch)  # 0 unseen, 1 on the path, 2 placed
    order: list[int] = []
    looped: dict[int, tuple[int, str, str]] = {}
    for start in range(len(batch)):
        if state[start]:
            continue
        state[start] = 1
        path = [start]
        pending = [iter(needs(start))]
        while path:
            step = next(pending[-1], None)
            if step is None:
                done = path.pop()
                pending.pop()
                state[done] = 2
                if done not in looped:
                    order.append(done)
            elif state[step] == 0:
                state[step] = 1
                path.append(step)
                pending.append(iter(needs(step)))
            elif state[step] == 1:  # back on the path: a cycle
                cycle = path[path.index(step) :]
                for at, member in enumerate(cycle):
                    target = batch[cycle[(at + 1) % len(cycle)]].id
                    what, ref = next((w, r) for w, r in references(member) if r == target)
                    looped.setdefault(
                        member,
                        (
                            member,
                            str(batch[member].id),
                            f"{what} {ref} leads back to this event "
                            f"(a cycle of {len(cycle)} events)",
                        ),
                    )
    return order, sorted(looped.values())


def _chain_order(rows: Sequence[StoredEvent]) -> list[StoredEvent]:
    """Depth-first along parent_id (iterative: chains may be very long)."""
    children: dict[str | None, list[StoredEvent]] = {}
    ids = {row.id for row in rows}
    for row in rows:  # rows come in insertion order, so siblings stay in that order
        parent = row.parent_id if row.parent_id in ids else None
        children.setdefault(parent, []).append(row)
    ordered: list[StoredEvent] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        row = stack.pop()
        ordered.append(row)
        stack.extend(reversed(children.get(row.id, [])))
    return ordered


def _row_event(row: Any) -> AgentEvent:
    return EVENT_ADAPTER.validate_json(row_json(row))


def row_json(row: Any) -> bytes:
    """A stored event row (id, trace_id, parent_id, timestamp, type, content, metadata)
    as the event's seed-form JSON, without parsing its payload."""
    parts = [
        b'{"id":"',
        row.id.encode(),
        b'","trace_id":"',
        row.trace_id.encode(),
        b'","parent_id":',
        b"null" if row.parent_id is None else b'"' + row.parent_id.encode() + b'"',
        b',"timestamp":"',
        row.timestamp.encode(),
        b'","type":"',
        row.type.encode(),
        b'","content":',
        row.content.encode(),
    ]
    if row.metadata is not None:
        parts += [b',"metadata":', row.metadata.encode()]
    parts.append(b"}")
    return b"".join(parts)
