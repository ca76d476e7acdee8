"""A session's AgentEvents as the rows of its live view (server-side; live.js does the same).

One row per thing a person reads: a user message, a person's post into a discussion
(mentor), the prompt a discussion gave an agent, a speech, an inner voice (a reply's
reasoning, or `generate_inner_voice`), an action (its arguments and, once it came, its
result), an error. A tool_result joins the row of its call and a token_usage sidecar the
row of the generation event it hangs off (the step's tokens and cost), as in
`static/js/live.js`, which applies the same rules to events arriving over `/api/ws`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from opencrab.dashboard.render import money

INNER_VOICE_ACTION = "generate_inner_voice"


@dataclass
class Usage:
    """One model call's tokens and cost (a token_usage event)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    model: str | None = None

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd

    def describe(self) -> str:
        """Like "1,200 in · 35 out tokens · $0.0012 · gpt-5-mini" (live.js writes the same)."""
        parts = [f"{self.input_tokens:,} in · {self.output_tokens:,} out tokens"]
        if self.cost_usd is not None:
            parts.append(money(self.cost_usd))
        if self.model:
            parts.append(self.model)
        return " · ".join(parts)


@dataclass
class Row:
    """One row of the view; `kind` is user, mentor, prompt, speech, inner, action or error."""

    seq: int
    id: str
    kind: str
    label: str
    timestamp: str
    who: str | None = None
    lang: str | None = None
    text: str = ""
    name: str = ""  # an action's name
    arguments: str = ""  # an action's arguments as indented JSON
    result: str | None = None  # None while the action runs
    failed: bool = False
    interrupted: bool = False
    usage: Usage | None = None
    waiting: bool = False  # an action held for a person's approval

    @property
    def state(self) -> str:
        """An action's state: running, waiting (for a person's approval), ok or failed."""
        if self.result is None:
            return "waiting" if self.waiting else "running"
        return "failed" if self.failed else "ok"


@dataclass
class Rows:
    """The rows in order, and the tokens and cost of every call among them."""

    rows: list[Row] = field(default_factory=list)
    totals: Usage = field(default_factory=Usage)
    by_id: dict[str, Row] = field(default_factory=dict)  # event id -> the row showing it


def pretty(value: Any) -> str:
    """Arguments as they are shown: indented JSON, or the text the model sent."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def build_rows(
    events: list[tuple[int, str | None, dict[str, Any]]],
    speakers: dict[str, tuple[str, str]],
    language: str,
) -> Rows:
    """Rows of `(seq, agent id or None, event)` in log order. `speakers` names agents by id
    as (name, language); text of no agent's (people's) is in `language`."""
    out = Rows()
    for seq, agent_id, event in events:
        add_event(out, seq, agent_id, event, speakers, language)
    return out


def add_event(
    out: Rows,
    seq: int,
    agent_id: str | None,
    event: dict[str, Any],
    speakers: dict[str, tuple[str, str]],
    language: str,
) -> None:
    """Add one event: a new row, or a result or usage joining the row it belongs to."""
    kind = event.get("type")
    content = event.get("content") or {}
    meta = event.get("metadata") or {}
    if not isinstance(meta, dict):
        meta = {}
    name: str | None = None
    lang = language
    if agent_id is not None:  # an agent no longer there goes by its id's start
        name, lang = speakers.get(agent_id, (agent_id[:8], language))
    if kind == "token_usage":
        usage = Usage(
            int(content.get("input_tokens") or 0),
            int(content.get("output_tokens") or 0),
            meta.get("cost_usd"),
            meta.get("model"),
        )
        out.totals.add(usage)
        parent = out.by_id.get(str(event.get("parent_id")))
        if parent is not None:
            parent.usage = usage
        return
    if kind == "tool_result":
        call = out.by_id.get(str(content.get("tool_call_id")))
        if call is not None:
            call.result = str(content.get("output", ""))
            call.failed = bool(content.get("is_error"))
            out.by_id[str(event["id"])] = call
            return
    row = Row(seq, str(event["id"]), "speech", "Speech", str(event["timestamp"]), name, lang)
    if kind == "user":
        row.text = str(content.get("text", ""))
        source = meta.get("source")
        if source == "internal":
            row.kind, row.label = "prompt", "Prompt to"
        elif source == "discussion":
            row.kind, row.label = "mentor", "Mentor"
            row.who = str(meta.get("sender_name") or meta.get("sender") or "")
        else:
            sender = str(meta.get("sender") or "user")
            row.kind, row.label = "user", "Operator" if sender == "operator" else "User"
            row.who = None if sender in ("user", "operator") else sender
    elif kind == "reasoning":
        row.kind, row.label, row.text = "inner", "Inner voice", str(content.get("text", ""))
    elif kind == "tool_call" and content.get("name") == INNER_VOICE_ACTION:
        arguments = content.get("arguments")
        said = arguments.get("content") if isinstance(arguments, dict) else arguments
        row.kind, row.label, row.text = "inner", "Inner voice", str(said or "")
        row.result = ""  # nothing to show: the thought is the row
    elif kind in ("tool_call", "tool_result"):
        row.kind, row.label = "action", "Action"
        if kind == "tool_call":
            row.name, row.arguments = str(content.get("name", "")), pretty(content.get("arguments"))
        else:  # its call is not among these rows
            row.name, row.result = str(meta.get("name", "")), str(content.get("output", ""))
            row.failed = bool(content.get("is_error"))
    elif kind == "message":
        row.text = str(content.get("text", ""))
        row.interrupted = bool(meta.get("interrupted"))
        if meta.get("kind") == "error":
            row.kind, row.label = "error", "Error"
        elif meta.get("via") == "broadcast_guidance":
            row.label = "Guidance"
    else:
        return
    out.rows.append(row)
    out.by_id[row.id] = row
