"""A trace's AgentEvents (seed 000) as the steps of its timeline.

The steps are `event_rows.build_rows`'s rows (a tool_result joins its call, a
token_usage sidecar folds into the generation event it hangs off) in parent-chain
order, each with its time: `offset_ms` from the first event, `latency_ms` from the event
it follows (its parent: for a reply or a tool call, how long the model took), and for a
tool call `tool_ms`, from the call to its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opencrab.dashboard.event_rows import Row, Usage, build_rows


@dataclass
class Step:
    """One row of the timeline and its timing."""

    row: Row
    offset_ms: int
    latency_ms: int | None
    tool_ms: int | None
    result_at: str | None = None


@dataclass
class Trace:
    """The steps, what their calls cost in all, and how long the trace took."""

    steps: list[Step] = field(default_factory=list)
    totals: Usage = field(default_factory=Usage)
    duration_ms: int = 0
    events: int = 0


def _at(stamp: Any) -> datetime:
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def _ms(later: datetime, earlier: datetime) -> int:
    return round((later - earlier).total_seconds() * 1000)


def build_trace(
    events: list[tuple[int, str | None, dict[str, Any]]],
    speakers: dict[str, tuple[str, str]],
    language: str,
) -> Trace:
    """The timeline of `(seq, agent id or None, event)` in parent-chain (or log) order."""
    out = Trace(events=len(events))
    if not events:
        return out
    rows = build_rows(events, speakers, language)
    by_id = {str(e["id"]): e for _, _, e in events}
    results = {
        str((e.get("content") or {}).get("tool_call_id")): e
        for _, _, e in events
        if e.get("type") == "tool_result"
    }
    times = [_at(e["timestamp"]) for _, _, e in events]
    start = min(times)
    out.duration_ms = _ms(max(times), start)
    for row in rows.rows:
        event = by_id[row.id]
        when = _at(event["timestamp"])
        parent = by_id.get(str(event.get("parent_id")))
        latency = None if parent is None else _ms(when, _at(parent["timestamp"]))
        result = results.get(row.id)
        tool_ms = None if result is None else _ms(_at(result["timestamp"]), when)
        out.steps.append(
            Step(
                row,
                _ms(when, start),
                latency,
                tool_ms,
                None if result is None else str(result["timestamp"]),
            )
        )
    out.totals = rows.totals
    return out
