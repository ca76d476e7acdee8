"""A typical AgentEvent chain for the event-log, feed and API tests."""

from __future__ import annotations

from uuid import UUID

from opencrab.events import (
    AgentEvent,
    MessagePayload,
    ReasoningPayload,
    TokenUsageDetails,
    TokenUsagePayload,
    ToolCallPayload,
    ToolResultPayload,
    UserPayload,
    new_event,
)


def chain(trace: UUID) -> list[AgentEvent]:
    """user → reasoning → tool_call (+ token_usage) → tool_result → message (+ token_usage)."""
    user = new_event(trace, UserPayload(text="Calculate 1+1"))
    reasoning = new_event(trace, ReasoningPayload(text="I should use python."), parent=user)
    call = new_event(
        trace, ToolCallPayload(name="python", arguments={"code": "1+1"}), parent=reasoning
    )
    call_usage = new_event(
        trace, TokenUsagePayload(input_tokens=100, output_tokens=20, total_tokens=120), parent=call
    )
    result = new_event(trace, ToolResultPayload(output="2", tool_call_id=call.id), parent=call)
    answer = new_event(trace, MessagePayload(text="It is 2."), parent=result)
    answer_usage = new_event(
        trace,
        TokenUsagePayload(
            input_tokens=150,
            output_tokens=5,
            total_tokens=155,
            details=TokenUsageDetails(cache_read_input_tokens=120, reasoning_output_tokens=3),
        ),
        parent=answer,
    )
    return [user, reasoning, call, call_usage, result, answer, answer_usage]
