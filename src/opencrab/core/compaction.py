"""History compaction: which old turns to drop when the context overflows, and the
summary that replaces them.

When a session's turns no longer fit the model's window, the oldest are dropped (after
summarising them) until the rest fits with room for the summary; the summary is a
`message` event with `metadata.kind = "compaction"` (and a system memory line), which
later turns read back as their history's start (core/context.py). The engine asks its
analysis model for the summary, or keeps an extract when that fails.

Example:
    step = await compact(context, recorder, summarise, model=model, language="en", texts=t)
    # None: the history fits; else the summary is recorded and replaces the dropped turns
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID, uuid4

from opencrab.core.context import (
    COMPACTION_KIND,
    Turn,
    TurnContext,
    estimate_tokens,
    extractive_summary,
    turns_transcript,
)
from opencrab.core.memory import SessionLog
from opencrab.core.recorder import now
from opencrab.core.steps import Compacted
from opencrab.events import MessageEvent, MessagePayload
from opencrab.llm.types import ChatRequest, ChatResponse, Message
from opencrab.prompts import Language, Prompts

if TYPE_CHECKING:
    from opencrab.core.recorder import TurnRecorder

SUMMARY_MAX_TOKENS = 400


@dataclass(frozen=True)
class CompactionPlan:
    """The turns to summarise and drop, the turns kept, and the tokens before."""

    dropped: list[Turn]
    kept: list[Turn]
    tokens_before: int


def plan_compaction(summary: str | None, turns: list[Turn], budget: int) -> CompactionPlan | None:
    """The oldest turns to drop so the history fits `budget`; None when it fits already
    (or there is nothing to drop: the sections were shrunk to fit instead)."""
    summary_tokens = estimate_tokens(summary or "") + 8
    total = summary_tokens + sum(t.tokens for t in turns)
    if total <= budget or not turns:
        return None
    kept: list[Turn] = []
    room = budget - summary_tokens - SUMMARY_MAX_TOKENS * 2
    for old in reversed(turns):
        if old.tokens > room:
            break
        kept.insert(0, old)
        room -= old.tokens
    return CompactionPlan(turns[: len(turns) - len(kept)], kept, total)


async def compact(
    context: TurnContext,
    recorder: TurnRecorder,
    summarise: Callable[[ChatRequest], Awaitable[ChatResponse | None]],
    *,
    model: str,
    language: Language,
    texts: Prompts,
) -> Compacted | None:
    """Drop (after summarising) the oldest turns of `context` until its history fits; the
    summary is recorded and takes their place in `context`. `summarise` makes the model
    call: None when it failed or said nothing (an extract is kept instead)."""
    plan = plan_compaction(context.summary, context.turns, context.history_budget())
    if plan is None:
        return None
    request = summary_request(
        context.summary, plan.dropped, model=model, language=language, texts=texts
    )
    reply = await summarise(request)
    text = extractive_summary(plan.dropped, language) if reply is None else reply.text.strip()
    event, note, step = compaction_records(
        plan,
        text,
        by_model=reply is not None,
        trace_id=recorder.trace_id,
        parent=recorder.last,
        session_id=recorder.session_id,
        texts=texts,
    )
    await recorder.compaction(event, note, reply)
    context.summary, context.turns = text, plan.kept
    return step


def summary_request(
    previous: str | None, dropped: Sequence[Turn], *, model: str, language: Language, texts: Prompts
) -> ChatRequest:
    """The model call that summarises the dropped turns (after the previous summary)."""
    transcript = turns_transcript(dropped, language)
    if previous:
        transcript = f"{texts['summary_header']}{previous}\n\n{transcript}"
    return ChatRequest(
        model=model,
        messages=[Message.system(texts["compaction_system"]), Message.user(transcript)],
        max_tokens=SUMMARY_MAX_TOKENS,
    )


def compaction_records(
    plan: CompactionPlan,
    text: str,
    *,
    by_model: bool,
    trace_id: str,
    parent: UUID | None,
    session_id: str,
    texts: Prompts,
) -> tuple[MessageEvent, SessionLog, Compacted]:
    """The summary's event, its memory line and the engine step announcing it."""
    event = MessageEvent(
        id=uuid4(),
        trace_id=UUID(trace_id),
        parent_id=parent,
        timestamp=now(),
        content=MessagePayload(text=text),
        metadata={
            "kind": COMPACTION_KIND,
            "dropped_turns": len(plan.dropped),
            "tokens_before": plan.tokens_before,
            "tokens_after": estimate_tokens(text) + sum(t.tokens for t in plan.kept),
            "summarised_by": "model" if by_model else "extract",
        },
    )
    note = SessionLog(
        session_id=session_id,
        log_type="system",
        content=texts.render("compaction_note", turns=len(plan.dropped), summary=text),
        metadata=dict(event.metadata or {}),
        event_id=str(event.id),
    )
    step = Compacted(
        dropped_turns=len(plan.dropped),
        summary=text,
        tokens_before=plan.tokens_before,
        tokens_after=(event.metadata or {})["tokens_after"],
        event_id=str(event.id),
    )
    return event, note, step
