"""AgentEvent JSON is exactly seed 000's serde form, and survives any round trip."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opencrab.events import (
    EVENT_ADAPTER,
    AgentEvent,
    MessagePayload,
    ReasoningPayload,
    TokenUsageDetails,
    TokenUsagePayload,
    ToolCallPayload,
    ToolResultPayload,
    UserPayload,
    event_dict,
    event_json,
    new_event,
    parse_event,
    parse_jsonl,
)

TRACE = UUID("0b8e9f3e-5a2c-4c1d-9a57-3f0c6d2b1a10")
IDS = [UUID(f"00000000-0000-4000-8000-00000000000{i}") for i in range(1, 6)]
WHEN = datetime(2026, 2, 23, 12, 40, 23, tzinfo=UTC)


def seed_chain() -> list[AgentEvent]:
    """The seed's `create_mock_chain`: User → Reasoning → ToolCall → TokenUsage, Result."""
    user, reasoning, call, usage, result = IDS

    def event(id_: UUID, parent: UUID | None, type_: str, content: Any) -> AgentEvent:
        return EVENT_ADAPTER.validate_python(
            {
                "id": id_,
                "trace_id": TRACE,
                "parent_id": parent,
                "timestamp": WHEN,
                "type": type_,
                "content": content,
            }
        )

    return [
        event(user, None, "user", UserPayload(text="Calculate 1+1")),
        event(reasoning, user, "reasoning", ReasoningPayload(text="I should use python.")),
        event(
            call,
            reasoning,
            "tool_call",
            ToolCallPayload(name="python", arguments={"code": "print(1+1)"}),
        ),
        event(
            usage,
            call,
            "token_usage",
            TokenUsagePayload(input_tokens=100, output_tokens=20, total_tokens=120),
        ),
        event(result, call, "tool_result", ToolResultPayload(output="2", tool_call_id=call)),
    ]


def test_seed_example_serialises_exactly() -> None:
    t = str(TRACE)
    u, r, c, k, res = (str(i) for i in IDS)
    ts = "2026-02-23T12:40:23Z"
    expected = [
        {"id": u, "trace_id": t, "parent_id": None, "timestamp": ts, "type": "user",
         "content": {"text": "Calculate 1+1"}},
        {"id": r, "trace_id": t, "parent_id": u, "timestamp": ts, "type": "reasoning",
         "content": {"text": "I should use python."}},
        {"id": c, "trace_id": t, "parent_id": r, "timestamp": ts, "type": "tool_call",
         "content": {"name": "python", "arguments": {"code": "print(1+1)"}}},
        {"id": k, "trace_id": t, "parent_id": c, "timestamp": ts, "type": "token_usage",
         "content": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}},
        {"id": res, "trace_id": t, "parent_id": c, "timestamp": ts, "type": "tool_result",
         "content": {"output": "2", "tool_call_id": c, "is_error": False}},
    ]  # fmt: skip
    chain = seed_chain()
    assert [event_dict(e) for e in chain] == expected
    # key order follows the serde struct: id, trace_id, parent_id, timestamp, type, content
    assert list(json.loads(event_json(chain[0]))) == [
        "id", "trace_id", "parent_id", "timestamp", "type", "content"
    ]  # fmt: skip
    assert [parse_event(json.dumps(e)) for e in expected] == chain
    assert [e.is_generation_event for e in chain] == [False, False, True, False, False]
    assert [e.is_context_event for e in chain] == [True, True, True, False, True]


def test_serde_defaults_and_omissions() -> None:
    base = {"id": str(IDS[0]), "trace_id": str(TRACE), "timestamp": "2026-02-23T21:40:23+09:00"}
    # parent_id may be absent (serde Option), metadata null is omitted on output
    event = parse_event(
        json.dumps({**base, "type": "user", "content": {"text": "hi"}, "metadata": None})
    )
    out = event_dict(event)
    assert out["parent_id"] is None
    assert "metadata" not in out
    assert out["timestamp"] == "2026-02-23T12:40:23Z"  # normalised to UTC
    # is_error defaults to false; details' missing fields serialise as null
    result = parse_event(
        json.dumps(
            {**base, "type": "tool_result", "content": {"output": "x", "tool_call_id": str(IDS[1])}}
        )
    )
    assert event_dict(result)["content"]["is_error"] is False
    usage = parse_event(
        json.dumps(
            {
                **base,
                "type": "token_usage",
                "content": {
                    "input_tokens": 1,
                    "output_tokens": 2,
                    "total_tokens": 3,
                    "details": {},
                },
                "metadata": {"call_id": "call_abc"},
            }
        )
    )
    assert event_dict(usage)["content"]["details"] == {
        "cache_read_input_tokens": None,
        "reasoning_output_tokens": None,
    }
    assert event_dict(usage)["metadata"] == {"call_id": "call_abc"}


def test_fraction_digits_follow_chrono() -> None:
    def stamp(dt: datetime) -> str:
        return str(event_dict(new_event(TRACE, UserPayload(text="x"), timestamp=dt))["timestamp"])

    assert stamp(WHEN) == "2026-02-23T12:40:23Z"
    assert stamp(WHEN.replace(microsecond=250000)) == "2026-02-23T12:40:23.250Z"
    assert stamp(WHEN.replace(microsecond=250001)) == "2026-02-23T12:40:23.250001Z"


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"type": "thought"}, "does not match any of the expected tags"),
        ({"timestamp": "2026-02-23T12:40:23"}, "timezone"),
        ({"id": "not-a-uuid"}, "UUID"),
        ({"content": {"text": 5}}, "valid string"),
        ({"content": {}}, "Field required"),
        ({"parentId": None}, "Extra inputs are not permitted"),
        ({"timestamp": "0001-01-01T00:00:00+05:00"}, "out of range once converted to UTC"),
    ],
)
def test_invalid_events_are_rejected(change: dict[str, Any], complaint: str) -> None:
    good = event_dict(seed_chain()[0])
    with pytest.raises(pydantic.ValidationError, match=complaint):
        parse_event(json.dumps({**good, **change}))


def test_token_counts_must_be_non_negative_i32() -> None:
    good = event_dict(seed_chain()[3])
    for bad in (-1, 2**31, "100", 1.5):
        content = {**good["content"], "input_tokens": bad}
        with pytest.raises(pydantic.ValidationError):
            parse_event(json.dumps({**good, "content": content}))


# ------------------------------------------------------------------ property-based round trip
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
i32 = st.integers(min_value=0, max_value=2**31 - 1)
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda m: timezone(timedelta(minutes=m))
)
payloads = st.one_of(
    st.builds(UserPayload, text=st.text()),
    st.builds(ReasoningPayload, text=st.text()),
    st.builds(ToolCallPayload, name=st.text(min_size=1), arguments=json_values),
    st.builds(ToolResultPayload, output=st.text(), tool_call_id=st.uuids(), is_error=st.booleans()),
    st.builds(MessagePayload, text=st.text()),
    st.builds(
        TokenUsagePayload,
        input_tokens=i32,
        output_tokens=i32,
        total_tokens=i32,
        details=st.none()
        | st.builds(
            TokenUsageDetails,
            cache_read_input_tokens=st.none() | i32,
            reasoning_output_tokens=st.none() | i32,
        ),
    ),
)


@st.composite
def events(draw: st.DrawFn) -> AgentEvent:
    return new_event(
        draw(st.uuids()),
        draw(payloads),
        parent=draw(st.none() | st.uuids()),
        metadata=draw(json_values),
        timestamp=draw(st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31), timezones=offsets)),
    )


@settings(max_examples=300)
@given(events())
def test_round_trip_through_json(event: AgentEvent) -> None:
    text = event_json(event)
    back = parse_event(text)
    assert back == event
    assert event_json(back) == text  # the serialised form is stable
    data = json.loads(text)
    assert ("metadata" in data) == (event.metadata is not None)
    assert data["timestamp"].endswith("Z")


def test_nanoseconds_survive_a_round_trip() -> None:
    good = event_dict(seed_chain()[0])
    for stamp in (
        "2026-02-23T12:40:23.123456789Z",
        "2026-02-23T12:40:23.000000001Z",
        "2026-02-23T12:40:23.100000000Z",  # chrono writes .100Z
    ):
        event = parse_event(json.dumps({**good, "timestamp": stamp}))
        expected = (
            stamp if stamp.endswith("1Z") or stamp.endswith("9Z") else "2026-02-23T12:40:23.100Z"
        )
        assert event_dict(event)["timestamp"] == expected
        assert parse_event(event_json(event)) == event
    later = parse_event(json.dumps({**good, "timestamp": "2026-02-23T12:40:23.123456790Z"}))
    earlier = parse_event(json.dumps({**good, "timestamp": "2026-02-23T12:40:23.123456789Z"}))
    assert later != earlier  # nanoseconds tell them apart
    assert earlier.timestamp.nanosecond == 789
    shifted = parse_event(json.dumps({**good, "timestamp": "2026-02-23T21:40:23.000000005+09:00"}))
    assert event_dict(shifted)["timestamp"] == "2026-02-23T12:40:23.000000005Z"


def test_unknown_fields_of_input_are_ignored_with_a_warning() -> None:
    good = event_dict(seed_chain()[0])
    lines = [
        json.dumps({**good, "source": "rust"}),
        json.dumps({**good, "id": str(IDS[1]), "content": {"text": "hi", "lang": "en"}}),
        json.dumps({**good, "id": str(IDS[2]), "content": {"txt": "hi"}, "extra": 1}),
    ]
    batch = parse_jsonl("\n".join(lines).encode())
    assert [str(e.id) for e in batch.events] == [str(IDS[0]), str(IDS[1])]
    assert batch.lines == [1, 2]
    assert batch.events[1].content == UserPayload(text="hi")
    assert batch.warnings == [
        (1, "unknown field ignored: source"),
        (2, "unknown field ignored: content.lang"),
    ]
    # a line with a real problem reports only that (its unknown field would be ignored)
    assert batch.problems == [(3, "content.text: Field required")]
    # what we build ourselves stays strict
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        EVENT_ADAPTER.validate_python({**seed_chain()[0].model_dump(), "source": "rust"})
