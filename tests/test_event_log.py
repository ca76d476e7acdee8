"""EventLog: every seed-000 rule is checked before writing; bad batches change nothing.

Every test that stores events runs on SQLite and on PostgreSQL (the `db` fixture below).
"""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest
import sqlalchemy as sa

from opencrab.errors import EventValidationError
from opencrab.event_log import EventLog, chain_order
from opencrab.events import (
    AgentEvent,
    TokenUsagePayload,
    ToolResultPayload,
    UserPayload,
    event_dict,
    event_json,
    new_event,
    parse_event,
)
from opencrab.store import Database
from opencrab.store import tables as t
from tests.fakes.event_chain import chain


@pytest.fixture
def db(any_db: Database) -> Database:
    """The store under test: SQLite, then PostgreSQL (see tests/conftest.py `store_url`)."""
    return any_db


def snapshot(db: Database) -> list[tuple[object, ...]]:
    with db.read() as conn:
        return [tuple(r) for r in conn.execute(sa.select(t.events).order_by(t.events.c.seq))]


def test_append_and_read_in_chain_order(event_log: EventLog) -> None:
    trace = uuid4()
    events = chain(trace)
    assert event_log.append_many(events) == len(events)
    assert event_log.trace(trace) == events
    assert [e.type for e in event_log.context(trace)] == [
        "user", "reasoning", "tool_call", "tool_result", "message"
    ]  # fmt: skip
    assert event_log.trace(uuid4()) == []


def test_chain_order_is_by_parent_not_by_insertion(event_log: EventLog) -> None:
    trace = uuid4()
    user, reasoning, call, call_usage, result, answer, answer_usage = chain(trace)
    # appended one at a time; the sidecar of the tool call arrives last of all
    for event in (user, reasoning, call, result, answer, answer_usage, call_usage):
        event_log.append(event)
    assert [e.id for e in event_log.trace(trace)] == [
        e.id for e in (user, reasoning, call, result, answer, answer_usage, call_usage)
    ]
    # siblings keep recording order; a sidecar recorded before the result comes first
    trace2 = uuid4()
    events = chain(trace2)
    event_log.append_many(events)
    assert [e.type for e in event_log.trace(trace2)][2:5] == [
        "tool_call",
        "token_usage",
        "tool_result",
    ]


def test_long_chains_do_not_recurse(event_log: EventLog) -> None:
    trace = uuid4()
    events: list[AgentEvent] = []
    parent = None
    for i in range(5000):
        event = new_event(trace, UserPayload(text=str(i)), parent=parent)
        events.append(event)
        parent = event
    event_log.append_many(events)
    assert [e.content.text for e in event_log.trace(trace)][-1] == "4999"  # type: ignore[union-attr]


def test_token_totals_per_trace_and_generation_event(event_log: EventLog) -> None:
    trace = uuid4()
    events = chain(trace)
    event_log.append_many(events)
    extra = new_event(
        trace, TokenUsagePayload(input_tokens=1, output_tokens=1, total_tokens=2), parent=events[5]
    )
    event_log.append(extra)
    totals = event_log.token_totals(trace).as_json()
    assert (totals["input_tokens"], totals["output_tokens"], totals["total_tokens"]) == (
        251,
        26,
        277,
    )
    call, answer = str(events[2].id), str(events[5].id)
    assert set(totals["by_event"]) == {call, answer}
    assert totals["by_event"][call] == {
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "cache_read_input_tokens": 0,
        "reasoning_output_tokens": 0,
    }
    assert totals["by_event"][answer]["total_tokens"] == 157
    assert totals["by_event"][answer]["cache_read_input_tokens"] == 120
    assert event_log.token_totals(uuid4()).as_json() == {
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "by_event": {},
    }


def test_appends_to_a_stored_trace_may_reference_stored_events(event_log: EventLog) -> None:
    trace = uuid4()
    first = chain(trace)
    event_log.append_many(first[:3])  # up to the tool call
    event_log.append_many(first[3:])  # usage + result name the stored call
    assert len(event_log.trace(trace)) == len(first)


# ------------------------------------------------------------------ every rule, nothing written
def rejected(event_log: EventLog, db: Database, batch: list[AgentEvent]) -> str:
    before = snapshot(db)
    with pytest.raises(EventValidationError) as err:
        event_log.append_many(batch)
    assert snapshot(db) == before
    return str(err.value)


@pytest.fixture
def stored(event_log: EventLog) -> list[AgentEvent]:
    events = chain(uuid4())
    event_log.append_many(events)
    return events


def test_parent_must_exist(event_log: EventLog, db: Database, stored: list[AgentEvent]) -> None:
    trace = stored[0].trace_id
    ok = new_event(trace, UserPayload(text="fine"), parent=stored[-2])
    orphan = new_event(trace, UserPayload(text="?"), parent=uuid4())
    message = rejected(event_log, db, [ok, orphan])
    assert f"event #2 ({orphan.id})" in message
    assert "does not exist" in message


def test_parent_must_be_in_the_same_trace(
    event_log: EventLog, db: Database, stored: list[AgentEvent]
) -> None:
    stranger = new_event(uuid4(), UserPayload(text="elsewhere"), parent=stored[0])
    message = rejected(event_log, db, [stranger])
    assert f"belongs to trace {stored[0].trace_id}" in message


def test_parent_must_come_before_its_child(event_log: EventLog, db: Database) -> None:
    trace = uuid4()
    user, reasoning, *_ = chain(trace)
    message = rejected(event_log, db, [reasoning, user])
    assert "comes later in the batch" in message


def test_event_cannot_be_its_own_parent(event_log: EventLog, db: Database) -> None:
    event = new_event(uuid4(), UserPayload(text="loop"))
    looped = event.model_copy(update={"parent_id": event.id})
    assert "is the event itself" in rejected(event_log, db, [looped])


def test_token_usage_parent_must_be_a_generation_event(
    event_log: EventLog, db: Database, stored: list[AgentEvent]
) -> None:
    trace = stored[0].trace_id
    usage = TokenUsagePayload(input_tokens=1, output_tokens=1, total_tokens=2)
    on_reasoning = new_event(trace, usage, parent=stored[1])
    message = rejected(event_log, db, [on_reasoning])
    assert "a token_usage parent must be a tool_call or message, not a reasoning" in message
    rootless = new_event(trace, usage)
    assert "needs a tool_call or message parent" in rejected(event_log, db, [rootless])


def test_tool_result_must_name_a_tool_call_of_the_trace(
    event_log: EventLog, db: Database, stored: list[AgentEvent]
) -> None:
    trace = stored[0].trace_id
    call = stored[2]
    unknown = new_event(trace, ToolResultPayload(output="?", tool_call_id=uuid4()), parent=call)
    assert "tool_call_id" in rejected(event_log, db, [unknown])
    not_a_call = new_event(
        trace, ToolResultPayload(output="?", tool_call_id=stored[0].id), parent=call
    )
    assert "names a user, not a tool_call" in rejected(event_log, db, [not_a_call])
    other = chain(uuid4())
    event_log.append_many(other)
    foreign = new_event(trace, ToolResultPayload(output="?", tool_call_id=other[2].id), parent=call)
    assert f"belongs to trace {other[0].trace_id}" in rejected(event_log, db, [foreign])


def test_ids_must_be_unique(event_log: EventLog, db: Database, stored: list[AgentEvent]) -> None:
    fresh = new_event(stored[0].trace_id, UserPayload(text="new"))
    assert "duplicate id in the batch" in rejected(event_log, db, [fresh, fresh])
    again = stored[0]
    message = rejected(event_log, db, [fresh, again])
    assert "already exists in the store" in message
    assert str(again.id) in message


def test_every_problem_of_a_batch_is_reported(event_log: EventLog, db: Database) -> None:
    trace = uuid4()
    bad = [
        new_event(trace, UserPayload(text="a"), parent=uuid4()),
        new_event(trace, UserPayload(text="b"), parent=uuid4()),
    ]
    with pytest.raises(EventValidationError) as err:
        event_log.append_many(bad)
    assert [index for index, _, _ in err.value.problems] == [0, 1]
    assert snapshot(db) == []


def test_append_inside_a_caller_transaction_rolls_back_together(
    event_log: EventLog, db: Database
) -> None:
    events = chain(uuid4())

    def failing_step() -> None:
        with db.write() as conn:
            event_log.append_many(events, conn=conn)
            raise RuntimeError("the step failed after writing its events")

    with pytest.raises(RuntimeError):
        failing_step()
    assert snapshot(db) == []


def test_stored_json_is_the_seed_form(event_log: EventLog, db: Database) -> None:
    events = chain(uuid4())
    event_log.append_many(events)
    assert [event_json(e) for e in event_log.trace(events[0].trace_id)] == [
        event_json(e) for e in events
    ]


def test_nanosecond_timestamps_are_stored_and_read_back(event_log: EventLog) -> None:
    trace = uuid4()
    first, second = chain(trace)[:2]
    text = event_json(first).replace(
        f'"timestamp":"{event_dict(first)["timestamp"]}"'.encode(),
        b'"timestamp":"2026-02-23T12:40:23.123456789Z"',
    )
    event_log.append_many([parse_event(text), second])
    back = event_log.trace(trace)
    assert event_dict(back[0])["timestamp"] == "2026-02-23T12:40:23.123456789Z"
    assert event_json(back[0]) == text


def test_chain_order_puts_parents_and_calls_first_keeping_input_order() -> None:
    events = chain(uuid4())
    shuffled = [events[i] for i in (6, 4, 0, 5, 3, 1, 2)]
    order, problems = chain_order(shuffled)
    assert problems == []
    assert [shuffled[i] for i in order] == [events[i] for i in (0, 1, 2, 4, 5, 6, 3)]


def test_chain_order_names_every_event_of_a_cycle() -> None:
    trace = uuid4()
    a, b, c = (uuid4() for _ in range(3))

    def user(id_: UUID, parent: UUID | None) -> AgentEvent:
        event = new_event(trace, UserPayload(text="x"), parent=parent)
        return event.model_copy(update={"id": id_})

    batch = [user(a, c), user(b, a), user(c, b), user(uuid4(), None)]
    order, problems = chain_order(batch)
    assert order == [3]
    assert sorted(problems) == sorted(
        [
            (0, str(a), f"parent {c} leads back to this event (a cycle of 3 events)"),
            (1, str(b), f"parent {a} leads back to this event (a cycle of 3 events)"),
            (2, str(c), f"parent {b} leads back to this event (a cycle of 3 events)"),
        ]
    )
