"""Turns, model calls and actions as spans of the OpenTelemetry GenAI semantic conventions.

One object sees everything from two places that already see every turn and every call:
it is a turn listener (TurnService.listeners: every step of every turn) and a call
observer (LlmRouter.observers: every attempt of every model call). From them it makes

- `invoke_agent {agent}` per turn (INTERNAL): `gen_ai.agent.id` / `.name`, the session
  as `gen_ai.conversation.id`; its trace id is the turn's AgentEvent trace id and its
  span id the low 64 bits of the turn's user event id (export.event_span_id). In a
  ticket's run (or any work span of the same trace) it hangs below that span; in a
  heartbeat's (another trace) it is linked to it;
- `chat {model}` per model call attempt (CLIENT), below its turn's span (outside a turn,
  below the current work's, e.g. a heartbeat's reflection; else a trace of its own): provider,
  request and response model, input/output/cached/reasoning tokens, finish reasons,
  time to first chunk (streamed calls), `error.type` for a failed attempt, and the
  call's `llm_usage_metrics` id (`opencrab.metrics_id`, which its token_usage event names);
- `execute_tool {name}` per action run (INTERNAL), below its turn's span: tool name,
  call id, `error.type` when it failed; its span id is the low 64 bits of its tool_call
  event's id, and `opencrab.event.id` names its tool_result event;
- the metrics `gen_ai.client.token.usage` and `gen_ai.client.operation.duration` (and
  `gen_ai.client.operation.time_to_first_chunk`) per call.
Message text (the user's message, the prompts, replies, tool arguments and results) is
set only with `[telemetry] capture_content = true`.

On the turn's path the hooks only take the time and append what they were told to a
queue: every BUILD_SECS a thread of the export's own builds the spans from it, in order,
as finished spans with those times (a turn's when it ends), and the batch span processor
exports them from another (export.py). `close` builds what is queued and ends the turns
still open.

Example:
    spans = GenAiSpans(sdk)
    runtime.turns.listeners.append(spans.on_step)
    runtime.router.observers.append(spans)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as GA
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Link, SpanContext, SpanKind

from opencrab.core.steps import (
    ActionDone,
    EngineStep,
    LlmReplied,
    TextDelta,
    TurnResult,
    TurnStarted,
)
from opencrab.core.turns import TurnInfo
from opencrab.core.work_spans import WorkSpan, current_work
from opencrab.llm.metrics import CallRecord
from opencrab.llm.router import CallInfo
from opencrab.llm.types import ChatRequest, ChatResponse, Message
from opencrab.telemetry.export import (
    TelemetrySdk,
    context_of,
    event_span_id,
    new_span_id,
    new_trace_id,
    trace_of,
)
from opencrab.telemetry.work import OtelWorkSpan

log = logging.getLogger(__name__)

PROVIDER_NAMES = {"google": "gcp.gemini", "azure": "azure.ai.openai"}
"""OpenCrab's provider names that the conventions spell otherwise (the rest are alike, or
have no well-known value and keep ours)."""
TOOL_ERROR = "tool_error"
"""`error.type` of an action that failed (its message is the span's status)."""
STALE_SECS = 3600.0
"""An open turn whose turn never ended (a cancelled stream) is closed after this long."""
BUILD_SECS = 0.25
"""How often the builder thread makes the spans of what was queued."""
INVOKE_AGENT = GA.GenAiOperationNameValues.INVOKE_AGENT.value
CHAT = GA.GenAiOperationNameValues.CHAT.value
EXECUTE_TOOL = GA.GenAiOperationNameValues.EXECUTE_TOOL.value


def provider_name(provider: str) -> str:
    """`gen_ai.provider.name` for an OpenCrab provider."""
    return PROVIDER_NAMES.get(provider, provider)


@dataclass
class _OpenTurn:
    """A turn whose `invoke_agent` span is made when it ends."""

    name: str
    context: SpanContext
    parent: SpanContext | None
    links: list[Link]
    start: int  # ns since the epoch
    attributes: dict[str, Any]
    mark: int  # when the last call or action ended: the next action's start
    calls: list[tuple[str, str]] = field(default_factory=list)  # (call id, name) to run


class GenAiSpans:
    """The turn listener and call observer that make the GenAI spans and metrics."""

    def __init__(self, sdk: TelemetrySdk) -> None:
        self.sdk = sdk
        self.capture = sdk.target.capture_content
        self.turns: dict[str, _OpenTurn] = {}  # session id -> its running turn
        self.token_usage = gen_ai_metrics.create_gen_ai_client_token_usage(sdk.meter)
        self.duration = gen_ai_metrics.create_gen_ai_client_operation_duration(sdk.meter)
        self.first_chunk = gen_ai_metrics.create_gen_ai_client_operation_time_to_first_chunk(
            sdk.meter
        )
        # what the hooks were told, in order; taken every BUILD_SECS by the builder thread
        self._pending: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._closing = threading.Event()
        self._draining = threading.Lock()  # the builder's, or a `flush`'s caller's
        self._builder = threading.Thread(target=self._build, name="opencrab-genai-spans")
        self._builder.daemon = True
        self._builder.start()

    # ------------------------------------------------------------ the hooks (turn's path)
    def on_step(self, info: TurnInfo, step: EngineStep) -> None:
        """TurnService listener: queue the step (with its time and the current work)."""
        if type(step) is not TextDelta:
            self._pending.append((self._on_step, (info, step, time.time_ns(), current_work())))

    def call_ended(
        self,
        record: CallRecord,
        info: CallInfo,
        request: ChatRequest,
        reply: ChatResponse | None,
    ) -> None:
        """LlmRouter observer: queue the call (with its time and the current work)."""
        now = time.time_ns()
        self._pending.append(
            (self._call_ended, (record, info, request, reply, now, current_work()))
        )

    def close(self) -> None:
        """Build what is queued, then end the turns still open (the process is stopping)."""
        self._closing.set()
        self._builder.join()
        at = time.time_ns()
        for turn in self.turns.values():
            self._end(turn, at, error=("interrupted", "the process stopped"))
        self.turns.clear()

    # ------------------------------------------------------------ the builder thread
    def _build(self) -> None:
        """Every BUILD_SECS, make the spans of what the hooks queued, in order (waking
        for each step would cost a turn more in thread switches than the spans do)."""
        while not self._closing.wait(BUILD_SECS):
            self._drain()
        self._drain()

    def flush(self) -> None:
        """Build what is queued now, in the caller's thread."""
        self._drain()

    def _drain(self) -> None:
        pending = self._pending
        with self._draining:
            while pending:
                handler, args = pending.popleft()
                try:
                    handler(*args)
                except Exception:  # a bad record never stops the export
                    log.exception("telemetry: a span could not be built")

    def _on_step(self, info: TurnInfo, step: EngineStep, at: int, work: WorkSpan | None) -> None:
        if isinstance(step, TurnStarted):
            self._started(info, step, at, work)
        elif isinstance(step, LlmReplied):
            turn = self.turns.get(info.session_id)
            if turn is not None:
                turn.calls += [(call.id, call.name) for call in step.tool_calls]
        elif isinstance(step, ActionDone):
            self._action(info.session_id, step, at)
        elif isinstance(step, TurnResult):
            self._ended(info.session_id, step, at)

    def _started(self, info: TurnInfo, step: TurnStarted, at: int, work: WorkSpan | None) -> None:
        for session_id, turn in list(self.turns.items()):  # turns that never ended
            if session_id == info.session_id or (at - turn.start) / 1e9 > STALE_SECS:
                self._end(self.turns.pop(session_id), at, error=("interrupted", "interrupted"))
        agent = info.agent
        attributes: dict[str, Any] = {
            GA.GEN_AI_OPERATION_NAME: INVOKE_AGENT,
            GA.GEN_AI_AGENT_ID: agent.id,
            GA.GEN_AI_AGENT_NAME: agent.name,
            GA.GEN_AI_CONVERSATION_ID: info.session_id,
            "opencrab.session.kind": info.kind,
            "opencrab.source": info.message.source.kind,
            "opencrab.event.id": step.user_event_id,
        }
        if self.capture:
            attributes[GA.GEN_AI_INPUT_MESSAGES] = _json(
                [_text_message("user", info.message.content.text)]
            )
        trace_id = trace_of(step.trace_id)
        parent, links = None, []
        if isinstance(work, OtelWorkSpan):
            if work.context.trace_id == trace_id:
                parent = work.context
            else:
                links.append(Link(work.context))
        self.turns[info.session_id] = _OpenTurn(
            f"invoke_agent {agent.name}",
            context_of(trace_id, event_span_id(step.user_event_id)),
            parent,
            links,
            at,
            attributes,
            at,
        )

    def _action(self, session_id: str, step: ActionDone, end: int) -> None:
        turn = self.turns.get(session_id)
        if turn is None:
            return
        call_id = _take_call(turn, step.name)
        attributes: dict[str, Any] = {
            GA.GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
            GA.GEN_AI_TOOL_NAME: step.name,
            GA.GEN_AI_TOOL_TYPE: "function",
            GA.GEN_AI_CONVERSATION_ID: session_id,
            "opencrab.event.id": step.result_event_id,
            "opencrab.call_event.id": step.call_event_id,
        }
        if call_id is not None:
            attributes[GA.GEN_AI_TOOL_CALL_ID] = call_id
        if self.capture:
            attributes[GA.GEN_AI_TOOL_CALL_ARGUMENTS] = _json(step.arguments)
            attributes[GA.GEN_AI_TOOL_CALL_RESULT] = step.result.output()
        error = None
        if not step.result.success:
            attributes[ERROR_TYPE] = TOOL_ERROR
            error = step.result.error or TOOL_ERROR
        self.sdk.emit(
            self.sdk.span(
                f"execute_tool {step.name}",
                context_of(turn.context.trace_id, event_span_id(step.call_event_id)),
                parent=turn.context,
                start=min(turn.mark, end),
                end=end,
                attributes=attributes,
                error=error,
            )
        )
        turn.mark = end

    def _ended(self, session_id: str, result: TurnResult, at: int) -> None:
        turn = self.turns.pop(session_id, None)
        if turn is None:
            return
        turn.attributes["opencrab.iterations"] = result.iterations
        if result.stopped_by is not None:
            turn.attributes["opencrab.stopped_by"] = result.stopped_by
        if self.capture and result.reply is not None:
            turn.attributes[GA.GEN_AI_OUTPUT_MESSAGES] = _json(
                [_text_message("assistant", result.reply)]
            )
        failed = result.error
        self._end(turn, at, error=None if failed is None else (failed.error, failed.message))

    def _end(self, turn: _OpenTurn, at: int, *, error: tuple[str, str] | None) -> None:
        """Emit the turn's `invoke_agent` span (`error`: its error type and message)."""
        if error is not None:
            turn.attributes[ERROR_TYPE] = error[0]
        self.sdk.emit(
            self.sdk.span(
                turn.name,
                turn.context,
                parent=turn.parent,
                start=turn.start,
                end=at,
                attributes=turn.attributes,
                links=turn.links,
                error=None if error is None else error[1] or error[0],
            )
        )

    def _call_ended(
        self,
        record: CallRecord,
        info: CallInfo,
        request: ChatRequest,
        reply: ChatResponse | None,
        end: int,
        work: WorkSpan | None,
    ) -> None:
        """A `chat` span (below its turn's span, else the work's: a heartbeat's reflection)
        and the call's metrics."""
        turn = self.turns.get(info.session_id) if info.session_id else None
        parent = turn.context if turn is not None else None
        if parent is None and isinstance(work, OtelWorkSpan):
            parent = work.context
        common: dict[str, Any] = {
            GA.GEN_AI_OPERATION_NAME: CHAT,
            GA.GEN_AI_PROVIDER_NAME: provider_name(record.provider),
            GA.GEN_AI_REQUEST_MODEL: record.model,
        }
        if reply is not None and reply.model:
            common[GA.GEN_AI_RESPONSE_MODEL] = reply.model
        failed = record.status == "error"
        if failed:
            common[ERROR_TYPE] = record.error_type or "_OTHER"
        attributes = self._chat_attributes(common, record, info, request, reply, turn is not None)
        trace_id = parent.trace_id if parent is not None else new_trace_id()
        start = end - record.latency_ms * 1_000_000  # latency is whole milliseconds
        if turn is not None:  # a turn's steps follow one another: never before the last
            start = max(start, min(turn.mark, end))
        self.sdk.emit(
            self.sdk.span(
                f"chat {record.model}",
                context_of(trace_id, new_span_id()),
                parent=parent,
                start=start,
                end=end,
                attributes=attributes,
                kind=SpanKind.CLIENT,
                error=(record.error or common[ERROR_TYPE]) if failed else None,
            )
        )
        if turn is not None:
            turn.mark = end
        self.duration.record(record.latency_ms / 1000, common)
        if record.time_to_first_token_ms is not None:
            self.first_chunk.record(record.time_to_first_token_ms / 1000, common)
        if not failed:
            self.token_usage.record(record.input_tokens, {**common, GA.GEN_AI_TOKEN_TYPE: "input"})
            self.token_usage.record(
                record.output_tokens, {**common, GA.GEN_AI_TOKEN_TYPE: "output"}
            )

    def _chat_attributes(
        self,
        common: dict[str, Any],
        record: CallRecord,
        info: CallInfo,
        request: ChatRequest,
        reply: ChatResponse | None,
        turn_span: bool,
    ) -> dict[str, Any]:
        """A `chat` span's attributes: `common` (the metrics') and the call's own."""
        attributes = dict(common)
        attributes.update(
            {
                GA.GEN_AI_USAGE_INPUT_TOKENS: record.input_tokens,
                GA.GEN_AI_USAGE_OUTPUT_TOKENS: record.output_tokens,
                "opencrab.metrics_id": record.id,
                "opencrab.cost_usd": record.estimated_cost_usd,
            }
        )
        # each attribute costs its encoding in every export: the usual values are left out
        optional = {
            GA.GEN_AI_REQUEST_STREAM: record.stream or None,
            "opencrab.attempt": record.attempt if record.attempt > 1 else None,
            GA.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: record.cache_read_tokens or None,
            GA.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: record.cache_write_tokens or None,
            GA.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: record.reasoning_tokens or None,
            GA.GEN_AI_REQUEST_MAX_TOKENS: request.max_tokens,
            GA.GEN_AI_REQUEST_TEMPERATURE: request.temperature,
            GA.GEN_AI_CONVERSATION_ID: info.session_id,
            GA.GEN_AI_AGENT_ID: None if turn_span else info.agent_id,  # a turn's span has it
            "opencrab.fallback_from": record.fallback_from,
        }
        attributes.update((key, value) for key, value in optional.items() if value is not None)
        if record.time_to_first_token_ms is not None:
            attributes[GA.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (
                record.time_to_first_token_ms / 1000
            )
        if reply is not None and reply.finish_reason:
            attributes[GA.GEN_AI_RESPONSE_FINISH_REASONS] = (reply.finish_reason,)
        if self.capture:
            attributes[GA.GEN_AI_INPUT_MESSAGES] = _json(
                [_message_json(m) for m in request.messages]
            )
            if reply is not None:
                output = _message_json(reply.message)
                output["finish_reason"] = reply.finish_reason or ""
                attributes[GA.GEN_AI_OUTPUT_MESSAGES] = _json([output])
        return attributes


def _take_call(turn: _OpenTurn, name: str) -> str | None:
    """The id of the reply's first call of `name` not run yet (the actions run in order)."""
    for index, (call_id, call_name) in enumerate(turn.calls):
        if call_name == name:
            del turn.calls[index]
            return call_id
    return None


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _message_json(message: Message) -> dict[str, Any]:
    """A message in the conventions' shape (role and parts)."""
    parts: list[dict[str, Any]] = []
    if message.role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.text}
        )
    elif message.text:
        parts.append({"type": "text", "content": message.text})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return {"role": message.role, "parts": parts}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
