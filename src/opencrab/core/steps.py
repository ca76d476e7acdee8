"""The steps of an engine turn (STYLE.md 5): what `SkillEngine.run` yields, in order.

    TurnStarted → [Compacted] → (TextDelta* → LlmReplied → ActionDone*)+ → [Spoke]
    → [TurnFailed] → TurnResult

Every step is durable when it is yielded; the CLI, the WebSocket stream and tests all
consume the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opencrab.actions.base import ActionResult
from opencrab.llm.types import ToolCall


@dataclass
class TurnStarted:
    session_id: str
    trace_id: str
    user_event_id: str


@dataclass
class Compacted:
    dropped_turns: int
    summary: str
    tokens_before: int
    tokens_after: int
    event_id: str


@dataclass
class TextDelta:
    text: str


@dataclass
class LlmReplied:
    provider: str
    model: str
    text: str
    tool_calls: list[ToolCall]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    latency_ms: int | None
    metrics_id: str | None
    finish_reason: str | None = None  # "length": the model was cut off at max_tokens


@dataclass
class ActionDone:
    name: str
    arguments: Any
    result: ActionResult
    call_event_id: str
    result_event_id: str


@dataclass
class Spoke:
    text: str
    via: str  # the action, or "message" for a plain-text answer
    event_id: str


@dataclass
class TurnFailed:
    error: str  # an error code, e.g. budget_exceeded
    message: str
    event_id: str


@dataclass
class TurnResult:
    """What a finished turn did; the last step of every turn."""

    session_id: str
    trace_id: str
    reply: str | None = None
    actions: list[ActionDone] = field(default_factory=list)
    iterations: int = 0
    error: TurnFailed | None = None
    stopped_by: str | None = None  # the action or reason the loop stopped on

    def as_json(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "actions": [
                {
                    "name": a.name,
                    "arguments": a.arguments,
                    "success": a.result.success,
                    "result": a.result.data if a.result.success else None,
                    "error": a.result.error,
                }
                for a in self.actions
            ],
            "traceId": self.trace_id,
            "sessionId": self.session_id,
            "iterations": self.iterations,
            "stoppedBy": self.stopped_by,
            "error": None
            if self.error is None
            else {"code": self.error.error, "message": self.error.message},
        }


EngineStep = (
    TurnStarted | Compacted | TextDelta | LlmReplied | ActionDone | Spoke | TurnFailed | TurnResult
)
