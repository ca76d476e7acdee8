"""What the model sees in a turn: the system context, the history, and fitting both in.

The system context is the seed's order (SkillEngine.build_context): IDENTITY, SOUL, the
agent's prompt, MEMORY, skills, LLM config, instruction. The history is rebuilt from the
session's AgentEvents. When both do not fit the model's context window, the oldest
turns are summarised (the summary is stored in memory and in the trace) and dropped;
the MEMORY and skill sections may be shortened; IDENTITY, SOUL and the prompt never are.
Every text written here comes from the agent's language (`opencrab.prompts`).
A turn's context is a `TurnContext` (built by core/turn_context.py).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection

from opencrab.events import (
    AgentEvent,
    MessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    UserEvent,
)
from opencrab.llm.types import Message, ToolCall, ToolDefinition
from opencrab.prompts import DEFAULT_LANGUAGE, Language, prompts
from opencrab.store.repositories import events as events_repo
from opencrab.store.repositories import memory as memory_repo
from opencrab.store.repositories import sessions as sessions_repo
from opencrab.store.repositories import skills as skills_repo
from opencrab.store.repositories import tool_settings as tool_settings_repo
from opencrab.store.repositories import tools as tools_repo

if TYPE_CHECKING:
    from opencrab.core.approvals import ApprovalGate
    from opencrab.core.skills import Skill

COMPACTION_KIND = "compaction"


def estimate_tokens(text: str) -> int:
    """A conservative token estimate: ~4 ASCII characters or 1 wide character per token."""
    if text.isascii():
        return len(text) // 4 + 1
    ascii_chars = len(text.encode("ascii", "ignore"))  # counted in C, not per character
    wide = len(text) - ascii_chars
    return ascii_chars // 4 + wide + 1


def message_tokens(message: Message) -> int:
    """Estimated tokens of one chat message, tool calls included."""
    total = 4 + estimate_tokens(message.text)
    for call in message.tool_calls:
        total += estimate_tokens(call.name) + estimate_tokens(json.dumps(call.arguments))
    return total


_TOOL_TOKENS: dict[tuple[str, str, int], int] = {}


def tools_tokens(tools: Sequence[ToolDefinition]) -> int:
    """Estimated tokens of tool definitions (memoised: actions' schemas do not change)."""
    total = 0
    for tool in tools:
        key = (tool.name, tool.description, id(tool.parameters))
        tokens = _TOOL_TOKENS.get(key)
        if tokens is None:
            tokens = estimate_tokens(tool.name + tool.description + json.dumps(tool.parameters))
            if len(_TOOL_TOKENS) < 10_000:
                _TOOL_TOKENS[key] = tokens
        total += tokens
    return total


@dataclass
class ContextSections:
    """The system context in its parts; `render` joins the non-empty ones.

    `instruction` defaults to the language's `instruction` text (choose an action).
    """

    identity: str
    soul: str
    prompt: str
    memory: str = ""
    skills: str = ""
    llm: str = ""
    language: Language = DEFAULT_LANGUAGE
    instruction: str = ""

    def __post_init__(self) -> None:
        if not self.instruction:
            self.instruction = prompts(self.language)["instruction"]

    def render(self) -> str:
        parts = [self.identity, self.soul, self.prompt, self.memory, self.skills, self.llm]
        return "\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n\n" + self.instruction

    def shrink_to(self, budget: int) -> bool:
        """Shorten MEMORY, then skills, then the LLM section to fit `budget` tokens.

        Returns False when even the fixed parts (IDENTITY, SOUL, prompt, instruction)
        exceed the budget; those are never cut.
        """
        truncated = prompts(self.language)["truncated"]
        for name in ("memory", "skills", "llm"):
            over = estimate_tokens(self.render()) - budget
            if over <= 0:
                return True
            text: str = getattr(self, name)
            keep = max(0, len(text) - over * 4 - len(truncated))
            setattr(self, name, text[:keep] + truncated if keep else "")
        return estimate_tokens(self.render()) <= budget


def prompt_section(prompt: str, language: Language) -> str:
    """The agent's prompt under its heading; "" when it has none."""
    if not prompt.strip():
        return ""
    return prompts(language).render("prompt_section", prompt=prompt.strip())


@dataclass
class TurnContext:
    """What a turn's model calls are built from, read in one snapshot at its start.

    `budget` is the tokens left for the history once the tools and a reply's reserve are
    counted; `summary` and `turns` are the stored history (the latest compaction summary
    and the turns after it; compaction may replace both). `active`, `allowed` and
    `approval` are what the turn may do: its active skills, the actions it may call and
    which of those calls wait for a person.
    """

    tools: list[ToolDefinition]
    budget: int
    system: Message
    user_text: str
    summary: str | None
    turns: list[Turn]
    active: list[Skill]
    allowed: set[str]
    approval: ApprovalGate

    def history_budget(self) -> int:
        """The tokens the stored history may take beside the system and user messages."""
        return self.budget - message_tokens(self.system) - estimate_tokens(self.user_text) - 8

    def messages(self, summary_header: str) -> list[Message]:
        """The first call's messages: system, the summary, the history, the user's."""
        history: list[Message] = [self.system]
        if self.summary:
            history.append(Message.user(summary_header + self.summary))
        for old in self.turns:
            history += old.messages
        history.append(Message.user(self.user_text))
        return history


# ------------------------------------------------------------------ history from events
@dataclass
class Turn:
    """One exchange of the history: the user's message and what followed it."""

    messages: list[Message] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(message_tokens(m) for m in self.messages)


def history_from_events(events: Sequence[AgentEvent]) -> tuple[str | None, list[Turn]]:
    """(the latest compaction summary or None, the turns after it) from a session's trace.

    A tool result joins the turn of its call, even when it was written later (a call a
    person approved after the session went on); a call with no result yet (one waiting
    for a person) is answered with UNANSWERED_CALL, as providers require every call to
    have its result.
    """
    summary: str | None = None
    turns: list[Turn] = []
    pending_calls: list[tuple[str, ToolCall]] = []
    placed: dict[str, tuple[Turn, str]] = {}  # call event id -> (its turn, model's call id)

    def flush_calls() -> None:
        if pending_calls:
            if not turns:
                turns.append(Turn())
            turns[-1].messages.append(Message.assistant(None, [c for _, c in pending_calls]))
            for event_id, call in pending_calls:
                placed[event_id] = (turns[-1], call.id)
            pending_calls.clear()

    for event in events:
        if isinstance(event, MessageEvent) and _kind(event) == COMPACTION_KIND:
            pending_calls.clear()
            placed.clear()
            summary, turns = event.content.text, []
            continue
        if isinstance(event, ToolCallEvent):
            call = ToolCall(
                id=_call_id(event), name=event.content.name, arguments=event.content.arguments
            )
            pending_calls.append((str(event.id), call))
            continue
        flush_calls()
        if isinstance(event, UserEvent):
            turns.append(Turn([Message.user(event.content.text)]))
        elif isinstance(event, ToolResultEvent):
            found = placed.pop(str(event.content.tool_call_id), None)
            if found is None:
                continue  # its call was summarised away (or answered already)
            turn, call_id = found
            turn.messages.append(
                Message.tool(call_id, event.content.output, is_error=event.content.is_error)
            )
        elif isinstance(event, MessageEvent) and _kind(event) is None:
            if not turns:
                turns.append(Turn())
            turns[-1].messages.append(Message.assistant(event.content.text))
    flush_calls()
    for turn, call_id in placed.values():  # calls still without a result
        turn.messages.append(Message.tool(call_id, UNANSWERED_CALL, is_error=True))
    return summary, turns


UNANSWERED_CALL = (
    "no result yet: this call has not been run (it waits for a person's approval); "
    "do not assume it happened"
)


def _kind(event: AgentEvent) -> str | None:
    meta = event.metadata
    kind = meta.get("kind") if isinstance(meta, dict) else None
    return kind if isinstance(kind, str) else None


def _call_id(event: ToolCallEvent) -> str:
    meta = event.metadata
    call_id = meta.get("call_id") if isinstance(meta, dict) else None
    return call_id if isinstance(call_id, str) and call_id else str(event.id)


def turns_transcript(
    turns: Sequence[Turn], language: Language, *, limit_chars: int = 24_000
) -> str:
    """Plain text of turns for a summariser, most recent text kept when too long."""
    texts = prompts(language)
    lines: list[str] = []
    for turn in turns:
        for message in turn.messages:
            if message.role == "tool":
                lines.append(texts.render("transcript_result", text=_clip(message.text, 400)))
            elif message.tool_calls:
                for call in message.tool_calls:
                    args = _clip(json.dumps(call.arguments, ensure_ascii=False), 400)
                    lines.append(texts.render("transcript_action", name=call.name, arguments=args))
            elif message.role == "user":
                lines.append(texts.render("transcript_user", text=message.text))
            else:
                lines.append(texts.render("transcript_self", text=message.text))
    text = "\n".join(lines)
    return text if len(text) <= limit_chars else "…" + text[-limit_chars:]


def extractive_summary(
    turns: Sequence[Turn], language: Language, *, limit_chars: int = 2_000
) -> str:
    """A summary made without a model: the start of every line, cut to fit."""
    lines = [_clip(line, 160) for line in turns_transcript(turns, language).splitlines()]
    text = "\n".join(lines)
    return text if len(text) <= limit_chars else text[: limit_chars - 1] + "…"


def _clip(text: str, limit: int) -> str:
    text = unicodedata.normalize("NFC", text).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def queue_context_reads(
    conn: Connection, agent_id: str, session_id: str | None, trace_id: str
) -> None:
    """Send ahead the reads a turn's context makes in its snapshot (the trace's last
    event, the skills' stamp, granted tools, tool settings, the session's model choices,
    curated memory and impressions): on PostgreSQL one round trip for all of them
    (Prepared.queue); the context's own reads then take these results."""
    events_repo.queue_last_id(conn, trace_id)
    skills_repo.queue_skills_stamp(conn, agent_id)
    tools_repo.queue_granted_tool_names(conn, agent_id)
    tool_settings_repo.queue_load(conn, agent_id)
    memory_repo.queue_context_reads(conn, agent_id, session_id or None)
    if session_id:
        sessions_repo.queue_session_context(conn, session_id)
