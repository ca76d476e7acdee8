"""AgentEvent v2 (seed 000): the record of everything an agent turn did.

The JSON form is exactly the seed's serde form:

    {"id": …, "trace_id": …, "parent_id": … | null, "timestamp": "…Z",
     "type": "user" | "reasoning" | "tool_call" | "tool_result" | "message" | "token_usage",
     "content": {…payload…}, "metadata": … (omitted when null)}

`parent_id` chains events in time; a `tool_result` names its call in `tool_call_id`;
a `token_usage` event is a sidecar leaf hanging off the `tool_call` or `message` that
cost the tokens, and is left out of the LLM context.

Example:
    event = parse_event('{"id": "…", "trace_id": "…", "timestamp": "2026-02-01T10:00:00Z",'
                        ' "type": "user", "content": {"text": "Calculate 1+1"}}')
    event_json(event)  # the same event, serialised in seed form
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

import orjson
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_serializer,
    model_serializer,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from opencrab.store.bulk import paused_gc

I32 = Annotated[int, Field(ge=0, le=2**31 - 1)]
"""A token count: seed 000 uses i32; negative counts are rejected."""


def _to_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp is out of range once converted to UTC") from None


class Timestamp(datetime):
    """A datetime that keeps the nanoseconds chrono's `DateTime<Utc>` has and Python's lacks.

    `nanosecond` (1–999) is the part below `microsecond`; it takes part in equality, and
    events whose time has no such part carry a plain datetime.

    Example:
        Timestamp.of(datetime(2026, 2, 23, 12, 40, 23, 123456, tzinfo=UTC), 789)
        # serialises as 2026-02-23T12:40:23.123456789Z
    """

    __slots__ = ("_nanosecond",)
    _nanosecond: int

    @classmethod
    def of(cls, value: datetime, nanosecond: int) -> Timestamp:
        """`value` with `nanosecond` (0–999) below its microsecond."""
        stamp = cls.combine(value.date(), value.timetz(), tzinfo=value.tzinfo)
        stamp._nanosecond = nanosecond
        return stamp

    @property
    def nanosecond(self) -> int:
        """The nanoseconds below `microsecond` (0–999)."""
        return getattr(self, "_nanosecond", 0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return datetime.__eq__(self, other) is True and self.nanosecond == nanosecond_of(other)

    def __hash__(self) -> int:
        return hash((datetime.__hash__(self), self.nanosecond))

    def __reduce__(self) -> Any:
        plain = datetime.combine(self.date(), self.timetz(), tzinfo=self.tzinfo)
        return (Timestamp.of, (plain, self.nanosecond))


def nanosecond_of(value: datetime) -> int:
    """The nanoseconds below a datetime's microsecond (0 unless it is a Timestamp)."""
    return value.nanosecond if isinstance(value, Timestamp) else 0


_FRACTION = re.compile(r"\.(\d{7,})")


def _keep_nanoseconds(
    value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
) -> Any:
    """Validate the time with pydantic (microseconds) and keep digits 7–9 of the fraction.

    The handler sees Python values, so it runs lax; the types strict mode allows are
    checked here: text in JSON, a datetime in Python.
    """
    nanosecond = 0
    if isinstance(value, str) and info.mode == "json":
        if len(value) > 27:  # longer than …:23.123456Z
            found = _FRACTION.search(value, 19)
            if found:
                nanosecond = int(found[1][6:9].ljust(3, "0"))
                value = value[: found.start(1) + 6] + value[found.end(1) :]
    elif isinstance(value, Timestamp):
        nanosecond = value.nanosecond
    elif not isinstance(value, datetime):
        raise PydanticCustomError("datetime_type", "Input should be a valid datetime")
    result = handler(value)
    return Timestamp.of(result, nanosecond) if nanosecond else result


UtcTimestamp = Annotated[
    AwareDatetime, Strict(False), AfterValidator(_to_utc), WrapValidator(_keep_nanoseconds)
]
"""An aware time, converted to UTC, to the nanosecond (chrono's precision)."""

EventType = Literal["user", "reasoning", "tool_call", "tool_result", "message", "token_usage"]
GENERATION_TYPES = frozenset({"tool_call", "message"})
_TYPE_NAMES = ("user", "reasoning", "tool_call", "tool_result", "message", "token_usage")


def _is_none(value: Any) -> bool:
    return value is None


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# --------------------------------------------------------------------------- payloads
class UserPayload(_Strict):
    """1. User input (the trigger)."""

    text: str


class ReasoningPayload(_Strict):
    """2. The assistant's thinking."""

    text: str


class ToolCallPayload(_Strict):
    """3. A tool call request; `arguments` is any JSON value."""

    name: str
    arguments: Any


class ToolResultPayload(_Strict):
    """4. A tool's result; `tool_call_id` names the tool_call event it answers."""

    output: str
    tool_call_id: UUID
    is_error: bool = False


class MessagePayload(_Strict):
    """5. The assistant's text answer."""

    text: str


class TokenUsageDetails(_Strict):
    """Breakdown of a token count; both fields serialise as null when unknown."""

    cache_read_input_tokens: I32 | None = None
    reasoning_output_tokens: I32 | None = None


class TokenUsagePayload(_Strict):
    """6. Token cost of the parent generation event (increments, not running totals)."""

    input_tokens: I32
    output_tokens: I32
    total_tokens: I32
    details: TokenUsageDetails | None = Field(default=None, exclude_if=_is_none)  # omitted


Payload = (
    UserPayload
    | ReasoningPayload
    | ToolCallPayload
    | ToolResultPayload
    | MessagePayload
    | TokenUsagePayload
)


# --------------------------------------------------------------------------- events
class EventBase(_Strict):
    """Fields every event has, in the seed's order."""

    id: UUID
    trace_id: UUID
    parent_id: UUID | None = None
    timestamp: UtcTimestamp

    @field_serializer("timestamp")
    def _rfc3339(self, value: datetime) -> str:
        return format_rfc3339(value)

    @model_serializer(mode="wrap")
    def _omit_null_metadata(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("metadata") is None:
            data.pop("metadata", None)
        return data

    @property
    def is_generation_event(self) -> bool:
        """True for tool_call and message: the events a token_usage may hang off."""
        return getattr(self, "type", None) in GENERATION_TYPES

    @property
    def is_context_event(self) -> bool:
        """True for every event that belongs in the LLM history (all but token_usage)."""
        return getattr(self, "type", None) != "token_usage"


class UserEvent(EventBase):
    type: Literal["user"] = "user"
    content: UserPayload
    metadata: Any = None


class ReasoningEvent(EventBase):
    type: Literal["reasoning"] = "reasoning"
    content: ReasoningPayload
    metadata: Any = None


class ToolCallEvent(EventBase):
    type: Literal["tool_call"] = "tool_call"
    content: ToolCallPayload
    metadata: Any = None


class ToolResultEvent(EventBase):
    type: Literal["tool_result"] = "tool_result"
    content: ToolResultPayload
    metadata: Any = None


class MessageEvent(EventBase):
    type: Literal["message"] = "message"
    content: MessagePayload
    metadata: Any = None


class TokenUsageEvent(EventBase):
    type: Literal["token_usage"] = "token_usage"
    content: TokenUsagePayload
    metadata: Any = None


AgentEvent = Annotated[
    UserEvent | ReasoningEvent | ToolCallEvent | ToolResultEvent | MessageEvent | TokenUsageEvent,
    Field(discriminator="type"),
]
"""One AgentEvent: a tagged union on `type`."""

EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
EVENTS_ADAPTER: TypeAdapter[list[AgentEvent]] = TypeAdapter(list[AgentEvent])

PAYLOAD_TYPES: dict[type[BaseModel], str] = {
    UserPayload: "user",
    ReasoningPayload: "reasoning",
    ToolCallPayload: "tool_call",
    ToolResultPayload: "tool_result",
    MessagePayload: "message",
    TokenUsagePayload: "token_usage",
}


def parse_event(data: str | bytes) -> AgentEvent:
    """Validate one event from its JSON text (raises pydantic.ValidationError)."""
    return EVENT_ADAPTER.validate_json(data)


@dataclass
class EventBatch:
    """Events read from JSON Lines, with the 1-based line of each, and what was wrong.

    `problems` are lines that are no event (line, reason); `warnings` name the unknown
    fields that were ignored (line, message), as serde ignores them.
    """

    events: list[AgentEvent] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[tuple[int, str]] = field(default_factory=list)


def parse_jsonl(data: bytes) -> EventBatch:
    """Parse JSON Lines of events, skipping blank lines.

    A bad line never stops the others from being checked. Unknown fields are ignored and
    named in a warning, as serde reads the seed's structs; events built in code
    (`new_event`, `EVENT_ADAPTER`) stay strict.
    """
    batch = EventBatch()
    validate = EVENT_ADAPTER.validate_json
    with paused_gc():
        for number, line in enumerate(data.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                batch.events.append(validate(line))
                batch.lines.append(number)
            except ValidationError as exc:
                _lenient(batch, number, line, exc)
    return batch


def _lenient(batch: EventBatch, number: int, line: bytes, exc: ValidationError) -> None:
    """A line strict validation refused: without its unknown fields, or a problem."""
    errors = exc.errors(include_url=False)
    unknown = [_where(e) for e in errors if e["type"] == "extra_forbidden"]
    others = [e for e in errors if e["type"] != "extra_forbidden"]
    if others or not unknown:
        batch.problems.append((number, _explain(others)))
        return
    data = orjson.loads(line)
    for path in unknown:
        holder = data
        for key in path[:-1]:
            holder = holder[key]
        del holder[path[-1]]
    try:
        batch.events.append(EVENT_ADAPTER.validate_json(orjson.dumps(data)))
    except ValidationError as again:  # not expected: the same line less its extras
        batch.problems.append((number, explain(again)))
        return
    batch.lines.append(number)
    noun = "field" if len(unknown) == 1 else "fields"
    names = ", ".join(".".join(map(str, p)) for p in unknown)
    batch.warnings.append((number, f"unknown {noun} ignored: {names}"))


def _where(err: ErrorDetails) -> list[str | int]:
    """An error's location without the union tag pydantic puts first."""
    loc = list(err["loc"])
    return loc[1:] if loc and loc[0] in _TYPE_NAMES else loc


def explain(exc: ValidationError) -> str:
    """A pydantic error as one line per problem: `content.text: Field required`."""
    return _explain(exc.errors(include_url=False))


def _explain(errors: list[ErrorDetails]) -> str:
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in _where(err))
        if err["type"] == "union_tag_not_found":
            parts.append(f"type: missing; one of {', '.join(_TYPE_NAMES)}")
        else:
            parts.append(f"{where}: {err['msg']}" if where else err["msg"])
    return "; ".join(parts)


def event_json(event: AgentEvent) -> bytes:
    """The event's JSON in seed form."""
    return EVENT_ADAPTER.dump_json(event)


def event_dict(event: AgentEvent) -> dict[str, Any]:
    """The event as a JSON-ready dict in seed form."""
    result: dict[str, Any] = EVENT_ADAPTER.dump_python(event, mode="json")
    return result


def new_event(
    trace_id: UUID,
    payload: Payload,
    *,
    parent: EventBase | UUID | None = None,
    metadata: Any = None,
    timestamp: datetime | None = None,
) -> AgentEvent:
    """Build an event with a fresh id and the current time.

    Example:
        user = new_event(trace, UserPayload(text="hi"))
        reply = new_event(trace, MessagePayload(text="hello"), parent=user)
    """
    parent_id = parent.id if isinstance(parent, EventBase) else parent
    return EVENT_ADAPTER.validate_python(
        {
            "id": uuid4(),
            "trace_id": trace_id,
            "parent_id": parent_id,
            "timestamp": timestamp or datetime.now(UTC),
            "type": PAYLOAD_TYPES[type(payload)],
            "content": payload,
            "metadata": metadata,
        }
    )


def format_rfc3339(value: datetime) -> str:
    """UTC RFC 3339 with `Z` and 0, 3, 6 or 9 fraction digits, as chrono's serde writes it."""
    nanos = value.microsecond * 1000 + nanosecond_of(value)
    value = value.astimezone(UTC).replace(tzinfo=None)
    if nanos == 0:
        return value.isoformat(timespec="seconds") + "Z"
    if nanos % 1_000_000 == 0:
        return value.isoformat(timespec="milliseconds") + "Z"
    if nanos % 1000 == 0:
        return value.isoformat(timespec="microseconds") + "Z"
    return f"{value.isoformat(timespec='seconds')}.{nanos:09d}Z"
