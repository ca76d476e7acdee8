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

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_serializer,
    model_serializer,
)

from opencrab.store.bulk import paused_gc

I32 = Annotated[int, Field(ge=0, le=2**31 - 1)]
"""A token count: seed 000 uses i32; negative counts are rejected."""


def _to_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp is out of range once converted to UTC") from None


UtcTimestamp = Annotated[AwareDatetime, AfterValidator(_to_utc)]

EventType = Literal["user", "reasoning", "tool_call", "tool_result", "message", "token_usage"]
GENERATION_TYPES = frozenset({"tool_call", "message"})
_TYPE_NAMES = ("user", "reasoning", "tool_call", "tool_result", "message", "token_usage")


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
    details: TokenUsageDetails | None = None

    @model_serializer(mode="wrap")
    def _omit_null_details(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("details") is None:
            data.pop("details", None)
        return data


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

_PAYLOAD_TYPES: dict[type[BaseModel], str] = {
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


def parse_jsonl(data: bytes) -> tuple[list[AgentEvent], list[int], list[tuple[int, str]]]:
    """Parse JSON Lines of events, skipping blank lines.

    Returns the events, the 1-based line number of each, and every problem as
    (line number, reason); a bad line never stops the others from being checked.
    """
    events: list[AgentEvent] = []
    lines: list[int] = []
    problems: list[tuple[int, str]] = []
    validate = EVENT_ADAPTER.validate_json
    with paused_gc():
        for number, line in enumerate(data.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                events.append(validate(line))
                lines.append(number)
            except ValidationError as exc:
                problems.append((number, explain(exc)))
    return events, lines, problems


def explain(exc: ValidationError) -> str:
    """A pydantic error as one line per problem: `content.text: Field required`."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        if loc and loc[0] in _TYPE_NAMES:
            loc = loc[1:]  # the union tag pydantic puts first
        where = ".".join(loc)
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
            "type": _PAYLOAD_TYPES[type(payload)],
            "content": payload,
            "metadata": metadata,
        }
    )


def format_rfc3339(value: datetime) -> str:
    """UTC RFC 3339 with `Z` and 0, 3 or 6 fraction digits, as chrono's serde writes it."""
    value = value.astimezone(UTC).replace(tzinfo=None)
    micros = value.microsecond
    if micros == 0:
        spec = "seconds"
    elif micros % 1000 == 0:
        spec = "milliseconds"
    else:
        spec = "microseconds"
    return value.isoformat(timespec=spec) + "Z"
