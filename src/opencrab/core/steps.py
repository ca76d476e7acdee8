"""The steps of an engine turn: what `SkillEngine.run` yields, in order.

    [Compacted] → TurnStarted
    → ( TextDelta* → LlmReplied → ActionDone* )*          one round per model call
    → [Spoke | TurnFailed] → TurnResult

- Compacted comes first, before the user's message is recorded: the history is fitted
  (old turns summarised) before the turn starts.
- TextDelta only when the turn streams; LlmReplied follows each model call.
- A plain-text answer: LlmReplied → Spoke. A turn-ending speech action (send_speech,
  broadcast_guidance): its ActionDone → Spoke. Other turn-ending actions end after their
  ActionDone with no Spoke.
- TurnFailed: budget, model error or timeout (no LlmReplied for that call) or an empty
  reply (after its LlmReplied).
- TurnResult is the last step of every turn (after max_iterations rounds, right after the
  last ActionDone).

Every step is durable when it is yielded and carries the ids of the rows it wrote
(events, the session messages), so no caller reads them back. The steps are a tagged
union: each has a `type` (its name on the wire) and `step_json` is the one serialiser
the WebSocket, the CLI's `--json` output and the dashboard's live chat all read;
`step_from_json` reads it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from opencrab.actions.base import ActionResult, SideEffect
from opencrab.llm.types import ToolCall


@dataclass(frozen=True)
class SessionMessage:
    """A session message (the `messages` table) as the step that wrote it stored it."""

    id: int
    role: str
    content: str
    timestamp: datetime
    event_id: str | None
    speaker_id: str | None
    speaker_name: str | None
    interrupted: bool = False


@dataclass
class TurnStarted:
    session_id: str
    trace_id: str
    user_event_id: str
    user_message: SessionMessage | None = None  # None for a prompt OpenCrab wrote itself
    type: Literal["chat.started"] = field(default="chat.started", init=False)


@dataclass
class Compacted:
    dropped_turns: int
    summary: str
    tokens_before: int
    tokens_after: int
    event_id: str
    type: Literal["compacted"] = field(default="compacted", init=False)


@dataclass
class TextDelta:
    text: str
    type: Literal["token"] = field(default="token", init=False)


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
    type: Literal["llm.replied"] = field(default="llm.replied", init=False)


@dataclass
class ActionDone:
    name: str
    arguments: Any
    result: ActionResult
    call_event_id: str
    result_event_id: str
    type: Literal["action"] = field(default="action", init=False)


@dataclass
class Spoke:
    text: str
    via: str  # the action, or "message" for a plain-text answer
    event_id: str
    message: SessionMessage | None = None  # the session message it was stored as
    type: Literal["reply"] = field(default="reply", init=False)


@dataclass
class TurnFailed:
    error: str  # an error code, e.g. budget_exceeded
    message: str
    event_id: str
    type: Literal["turn.failed"] = field(default="turn.failed", init=False)


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
    approval_id: str | None = None  # stopped_by "approval": the call waiting (core/approvals)
    type: Literal["chat.done"] = field(default="chat.done", init=False)


EngineStep = (
    TurnStarted | Compacted | TextDelta | LlmReplied | ActionDone | Spoke | TurnFailed | TurnResult
)


# ------------------------------------------------------------------ the serialiser
def step_json(step: EngineStep) -> dict[str, Any]:
    """The step as a JSON object: `type` names the step; fields are camelCase."""
    body: dict[str, Any] = {"type": step.type}
    match step:
        case TurnStarted():
            body |= {
                "sessionId": step.session_id,
                "traceId": step.trace_id,
                "userEventId": step.user_event_id,
                "userMessage": _message_json(step.user_message),
            }
        case Compacted():
            body |= {
                "droppedTurns": step.dropped_turns,
                "summary": step.summary,
                "tokensBefore": step.tokens_before,
                "tokensAfter": step.tokens_after,
                "eventId": step.event_id,
            }
        case TextDelta():
            body["text"] = step.text
        case LlmReplied():
            body |= {
                "provider": step.provider,
                "model": step.model,
                "text": step.text,
                "toolCalls": [call.model_dump(mode="json") for call in step.tool_calls],
                "inputTokens": step.input_tokens,
                "outputTokens": step.output_tokens,
                "costUsd": step.cost_usd,
                "latencyMs": step.latency_ms,
                "metricsId": step.metrics_id,
                "finishReason": step.finish_reason,
            }
        case ActionDone():
            body |= _action_json(step)
        case Spoke():
            body |= {
                "text": step.text,
                "via": step.via,
                "eventId": step.event_id,
                "message": _message_json(step.message),
            }
        case TurnFailed():
            body |= {"error": step.error, "message": step.message, "eventId": step.event_id}
        case TurnResult():
            body |= {
                "sessionId": step.session_id,
                "traceId": step.trace_id,
                "reply": step.reply,
                "stoppedBy": step.stopped_by,
                "approvalId": step.approval_id,
                "iterations": step.iterations,
                # the wire's `error` is the message; the code is beside it
                "error": None if step.error is None else step.error.message,
                "failure": None if step.error is None else step_json(step.error),
                "actions": [_action_json(done) for done in step.actions],
            }
    return body


def step_from_json(data: dict[str, Any]) -> EngineStep:
    """The step `step_json` wrote (ValueError for an unknown `type`)."""
    kind = data.get("type")
    if kind == "chat.started":
        return TurnStarted(
            data["sessionId"],
            data["traceId"],
            data["userEventId"],
            _message_from(data.get("userMessage")),
        )
    if kind == "compacted":
        return Compacted(
            data["droppedTurns"],
            data["summary"],
            data["tokensBefore"],
            data["tokensAfter"],
            data["eventId"],
        )
    if kind == "token":
        return TextDelta(data["text"])
    if kind == "llm.replied":
        return LlmReplied(
            provider=data["provider"],
            model=data["model"],
            text=data["text"],
            tool_calls=[ToolCall.model_validate(c) for c in data["toolCalls"]],
            input_tokens=data["inputTokens"],
            output_tokens=data["outputTokens"],
            cost_usd=data["costUsd"],
            latency_ms=data["latencyMs"],
            metrics_id=data["metricsId"],
            finish_reason=data["finishReason"],
        )
    if kind == "action":
        return _action_from(data)
    if kind == "reply":
        return Spoke(data["text"], data["via"], data["eventId"], _message_from(data.get("message")))
    if kind == "turn.failed":
        return TurnFailed(data["error"], data["message"], data["eventId"])
    if kind == "chat.done":
        failure = data.get("failure")
        error = step_from_json(failure) if failure else None
        assert error is None or isinstance(error, TurnFailed)
        return TurnResult(
            session_id=data["sessionId"],
            trace_id=data["traceId"],
            reply=data["reply"],
            actions=[_action_from(a) for a in data["actions"]],
            iterations=data["iterations"],
            error=error,
            stopped_by=data["stoppedBy"],
            approval_id=data.get("approvalId"),
        )
    raise ValueError(f"unknown step type {kind!r}")


def _action_json(done: ActionDone) -> dict[str, Any]:
    result = done.result
    return {
        "name": done.name,
        "arguments": done.arguments,
        "success": result.success,
        "output": result.output(),  # the text the model saw
        "result": result.data if result.success else None,
        "failure": result.error,
        "sideEffects": [effect.model_dump(mode="json") for effect in result.side_effects],
        "callEventId": done.call_event_id,
        "resultEventId": done.result_event_id,
    }


def _action_from(data: dict[str, Any]) -> ActionDone:
    success = bool(data["success"])
    result = ActionResult(
        success=success,
        data=json.loads(data["output"]) if success else None,
        error=data["failure"],
        side_effects=[SideEffect.model_validate(e) for e in data["sideEffects"]],
    )
    return ActionDone(
        data["name"], data["arguments"], result, data["callEventId"], data["resultEventId"]
    )


def _message_json(message: SessionMessage | None) -> dict[str, Any] | None:
    if message is None:
        return None
    return {
        "id": message.id,
        "role": message.role,
        "content": message.content,
        "timestamp": message.timestamp.isoformat(),
        "eventId": message.event_id,
        "speakerId": message.speaker_id,
        "speakerName": message.speaker_name,
        "interrupted": message.interrupted,
    }


def _message_from(data: dict[str, Any] | None) -> SessionMessage | None:
    if data is None:
        return None
    return SessionMessage(
        id=data["id"],
        role=data["role"],
        content=data["content"],
        timestamp=datetime.fromisoformat(data["timestamp"]),
        event_id=data["eventId"],
        speaker_id=data["speakerId"],
        speaker_name=data["speakerName"],
        interrupted=data["interrupted"],
    )
