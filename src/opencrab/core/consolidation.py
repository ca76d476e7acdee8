"""Memory consolidated at the end of a session: seed 001's learning loop, besides the
heartbeat's hourly reflection (core/heartbeat.py, reflect_and_learn).

A session has ended for an agent when its latest log line is `[learning]
session_idle_minutes` old, or when its session row is no longer active (DELETE
/api/sessions/{id}, the CLI, the dashboard). Then the agent's analysis model reads the
session's lines not consolidated yet (the latest `max_lines`, with their times) and the
memories already kept, and answers with a summary, curated memories and impressions of
the others: the memories are kept through `MemoryManager.remember` (one saying the same
as a kept one is merged into it), the impressions through `update_impression` (only of
participants who spoke in those lines), and the summary becomes a `system` line of the
session (so a search, and a question about that day, finds it). The call is an ordinary
router call (purpose `analysis`, task `consolidation`): its cost, tokens and latency are
a metrics row like every other, under the agent's and the fleet's budgets.

How far each session was consolidated is a `memory_consolidations` row (its last line's
id); lines written later make the session a candidate again, for those lines only. The
`memory-consolidation` service (opencrab.process) looks every `check_secs` in every
process; a session is consolidated under its lease (`consolidate:<agent>:<session>`)
and the row is read again once the lease is held, so two processes never summarise one
session twice. A failed call (no key, a refused budget, an unusable answer) is recorded
as `failed` with its reason and not tried again until the session has new lines.

Example:
    consolidator = Consolidator(runtime)
    outcomes = await consolidator.sweep()       # every ended session, once
    outcome = await consolidator.consolidate(agent_id, session_id)  # one, now
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from opencrab.core.llm_config import agent_model, session_overrides
from opencrab.core.memory import MemoryManager, SessionLog, StoredLog
from opencrab.errors import LlmError, NotFoundError
from opencrab.llm.router import CallInfo
from opencrab.llm.types import ChatRequest, Message
from opencrab.offload import run_blocking
from opencrab.prompts import prompts
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.repositories import consolidation as repo
from opencrab.store.repositories.consolidation import consolidation_key

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.core.runtime import Runtime

log = logging.getLogger(__name__)

CATEGORIES = ("core", "facts", "decisions", "preferences", "people")
"""The categories a consolidation may keep memories in (anything else: `facts`)."""
IMPRESSION_FIELDS = ("personality", "communication_style", "recent_behavior", "agreement", "notes")
MAX_MEMORIES = 20  # kept from one answer
MAX_MEMORY_CHARS = 1000
MAX_FIELD_CHARS = 500
KNOWN_SHOWN = 40  # memories already kept, shown to the model so it does not repeat them
SWEEP_BATCH = 20


@dataclass
class Outcome:
    """What one consolidation did."""

    agent_id: str
    session_id: str
    status: str  # done, failed, empty
    lines: int = 0
    memories: list[str] = field(default_factory=list)  # ids kept or merged into
    merged: int = 0
    impressions: int = 0
    summary: str = ""
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "lines": self.lines,
            "memories": len(self.memories),
            "merged": self.merged,
            "impressions": self.impressions,
            "error": self.error,
        }


class Consolidator:
    """Finds ended sessions and consolidates each once (see the module docstring)."""

    def __init__(self, runtime: Runtime, *, leases: LeaseKeeper | None = None) -> None:
        self.runtime = runtime
        self.leases = leases or runtime.leases
        self.config = runtime.settings.learning

    async def sweep(self, now: datetime | None = None) -> list[Outcome]:
        """Consolidate every session that ended by `now` and has new lines (a batch at a
        time, oldest first); returns what this process did."""
        now = now or datetime.now(UTC)
        idle = timedelta(minutes=self.config.session_idle_minutes)
        ended = await run_blocking(
            repo.ended_sessions,
            self.runtime.db,
            idle_before=now - idle,
            since=now - timedelta(hours=self.config.max_age_hours),
            limit=SWEEP_BATCH,
        )
        outcomes = []
        for session in ended:
            outcome = await self.consolidate(session.agent_id, session.session_id)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    async def consolidate(self, agent_id: str, session_id: str) -> Outcome | None:
        """Consolidate the session's new lines under its lease; None when another process
        holds it or nothing is new (it was done meanwhile)."""
        key = consolidation_key(agent_id, session_id)
        if not await self.leases.acquire(key):
            return None
        try:
            return await self._consolidate(agent_id, session_id)
        finally:
            await self.leases.release(key)

    async def _consolidate(self, agent_id: str, session_id: str) -> Outcome | None:
        db = self.runtime.db
        upto = await run_blocking(repo.done_upto, db, agent_id, session_id)
        memory = MemoryManager(db, agent_id)
        lines = [
            line
            for line in await run_blocking(
                memory.session_logs, session_id, limit=self.config.max_lines
            )
            if line.id > upto
        ]
        if not lines:
            return None
        top = lines[-1].id
        outcome = Outcome(agent_id, session_id, "done", lines=len(lines))
        try:
            agent = await run_blocking(self.runtime.agents.get, agent_id)
        except NotFoundError:
            return None  # deleted meanwhile: its lines went with it
        answer = await self._ask(agent, session_id, memory, lines, outcome)
        if answer is not None:
            await run_blocking(self._keep, agent, memory, lines, answer, outcome)
        detail = {"summary": outcome.summary, "lines": outcome.lines}
        if outcome.error:
            detail["error"] = outcome.error

        def write(conn: Connection) -> None:
            last = top
            if outcome.summary:  # a line of the session, consolidated with the others
                summary = SessionLog(
                    session_id=session_id,
                    log_type="system",
                    content=outcome.summary,
                    speaker_id=agent_id,
                    metadata={"consolidation": True, "lines": len(lines)},
                )
                memory.append_session_log(summary, conn=conn)
                last = repo.latest_line(conn, agent_id, session_id)
            repo.record(
                conn,
                agent_id,
                session_id,
                last_log_id=last,
                status=outcome.status,
                memories=len(outcome.memories),
                merged=outcome.merged,
                impressions=outcome.impressions,
                detail=detail,
            )

        await run_blocking(_in_transaction, db, write)
        log.info("consolidated session %s of agent %s: %s", session_id, agent_id, outcome.as_json())
        return outcome

    async def _ask(
        self,
        agent: Agent,
        session_id: str,
        memory: MemoryManager,
        lines: list[StoredLog],
        outcome: Outcome,
    ) -> dict[str, Any] | None:
        """The analysis model's answer as a JSON object; None (outcome failed) if none."""
        texts = prompts(agent.language)
        known = await run_blocking(memory.list_curated)
        shown = "\n".join(f"- [{m.category}] {m.content[:200]}" for m in known[-KNOWN_SHOWN:])
        transcript = "\n".join(
            f"[{line.created_at.astimezone(UTC):%Y-%m-%d %H:%M} {line.log_type}"
            f"{' ' + line.speaker_id if line.speaker_id else ''}] {line.content[:500]}"
            for line in lines
        )
        chosen = await run_blocking(session_overrides, self.runtime.db, session_id, agent.id)
        request = ChatRequest(
            model=agent_model(agent.llm_config, "analysis", {}, chosen),
            messages=[
                Message.system(texts.render("consolidate_system")),
                Message.user(
                    texts.render(
                        "consolidate_user",
                        known=shown or texts["consolidate_nothing_known"],
                        session=session_id,
                        log=transcript,
                    )
                ),
            ],
            max_tokens=1200,
        )
        info = CallInfo(
            purpose="analysis",
            task_type="consolidation",
            agent_id=agent.id,
            session_id=session_id,
        )
        try:
            reply = await self.runtime.router.chat(request, info)
        except LlmError as exc:
            outcome.status, outcome.error = "failed", str(exc)[:500]
            return None
        answer = _json_object(reply.text)
        if answer is None:
            outcome.status, outcome.error = "failed", "the model gave no JSON object"
        return answer

    def _keep(
        self,
        agent: Agent,
        memory: MemoryManager,
        lines: list[StoredLog],
        answer: dict[str, Any],
        outcome: Outcome,
    ) -> None:
        """Keep the answer's memories, impressions and summary (blocking)."""
        session_id = outcome.session_id
        for item in _items(answer.get("memories"))[:MAX_MEMORIES]:
            content = _text(item.get("content"), MAX_MEMORY_CHARS)
            if not content:
                continue
            category = item.get("category")
            if category not in CATEGORIES:
                category = "facts"
            kept, merged = memory.remember(str(category), content)
            outcome.memories.append(kept.id)
            outcome.merged += merged
        speakers = {line.speaker_id for line in lines if line.speaker_id} - {agent.id}
        turn = max((line.turn_number or 0 for line in lines), default=0)
        for item in _items(answer.get("impressions")):
            target = _text(item.get("target_id"), 64)
            name = _text(item.get("target_name"), 100) or target
            if target not in speakers or not name:
                continue  # only of someone who spoke in these lines
            values = {f: _text(item.get(f), MAX_FIELD_CHARS) or None for f in IMPRESSION_FIELDS}
            memory.update_impression(session_id, target, name, turn=turn or None, **values)
            outcome.impressions += 1
        outcome.summary = _text(answer.get("summary"), 4000)
        if not (outcome.memories or outcome.impressions or outcome.summary):
            outcome.status = "empty"


def _in_transaction(db: Database, change: Callable[[Connection], None]) -> None:
    with db.write() as conn:
        change(conn)


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's answer (fenced or bare), else None."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None
