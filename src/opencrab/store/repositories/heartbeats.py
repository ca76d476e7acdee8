"""The heartbeat repository: `heartbeat_log` (one row per tick) and what the heartbeat's
cheap checks read from sessions, memory and metrics in one snapshot.

Example:
    facts = observe(db, since=midnight)
    write_ticks(db, [{"agent_id": a, "decision": "idle", "result_json": {}, "created_at": now}])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.repositories.approvals import waiting_sessions
from opencrab.store.repositories.memory import latest_log_ids, latest_speeches
from opencrab.store.repositories.sessions import autonomous_discussions
from opencrab.store.tables import agents, heartbeat_log, llm_usage_metrics


@dataclass
class Facts:
    """What the heartbeat's checks need, read in one snapshot."""

    spent: dict[str, float] = field(default_factory=dict)
    """Each agent's LLM cost since the time asked for, in USD."""
    discussions: list[dict[str, Any]] = field(default_factory=list)
    """Each participant of each active autonomous discussion (see
    `sessions.autonomous_discussions`), with the discussion's latest speech line
    (`last_speech_log`, its id) and speaker (`last_speaker`)."""
    latest_log: dict[str, int] = field(default_factory=dict)
    """Each agent's highest session log id."""


def observe(db: Database, *, since: datetime) -> Facts:
    """The heartbeat's facts: costs since `since`, autonomous discussions (those a runner
    drives, and those waiting for a decision on a held call, left out), each agent's
    latest log line."""
    m = llm_usage_metrics.c
    with db.read() as conn:
        spent = {
            r.agent_id: float(r.cost)
            for r in conn.execute(
                sa.select(m.agent_id, sa.func.sum(m.estimated_cost_usd).label("cost"))
                .where(m.timestamp >= since)
                .group_by(m.agent_id)
            )
        }
        found = [  # discussions a DiscussionRunner drives are left to it
            r for r in autonomous_discussions(conn) if not (r["context"] or {}).get("runner")
        ]
        # … and those waiting for a person's decision on a call, or the turn after it
        waiting = waiting_sessions(conn, sorted({str(r["id"]) for r in found}))
        found = [r for r in found if str(r["id"]) not in waiting]
        active = sorted({str(r["id"]) for r in found})
        latest = latest_speeches(conn, active) if active else {}
        discussions = [
            {
                **{k: v for k, v in r.items() if k != "context"},
                "last_speech_log": latest.get(str(r["id"]), (None, None))[0],
                "last_speaker": latest.get(str(r["id"]), (None, None))[1],
            }
            for r in found
        ]
        return Facts(spent=spent, discussions=discussions, latest_log=latest_log_ids(conn))


def write_ticks(db: Database, rows: Sequence[dict[str, Any]]) -> set[str]:
    """Write heartbeat_log rows (agent_id, decision, result_json, created_at) at once;
    the rows of agents deleted meanwhile are left out, and their ids returned.

    The agents are read in the writing transaction; an agent deleted by another process
    between that read and the insert (a foreign key violation on PostgreSQL) makes it
    read them again, a few times at most."""
    wanted = {str(r["agent_id"]) for r in rows}
    for attempt in range(3):
        try:
            with db.write() as conn:
                found = conn.execute(sa.select(agents.c.id).where(agents.c.id.in_(wanted)))
                there = {str(a) for a in found.scalars()}
                kept = [r for r in rows if str(r["agent_id"]) in there]
                if kept:
                    conn.execute(heartbeat_log.insert(), kept)
        except sa.exc.IntegrityError:
            if attempt == 2:
                raise
        else:
            return wanted - there
    return set()  # not reached: the last attempt returns or raises


@dataclass(frozen=True)
class LoggedTick:
    """A tick as heartbeat_log keeps it."""

    created_at: datetime
    result: dict[str, Any]


def last_ticks(
    db: Database, agent_id: str, *, speeches: int = 50
) -> tuple[LoggedTick | None, list[LoggedTick]]:
    """The agent's latest reflection (decision "learn") and its latest `speeches`
    "speak" ticks, newest first."""
    h = heartbeat_log.c
    with db.read() as conn:
        learned = conn.execute(
            sa.select(h.created_at, h.result_json)
            .where(h.agent_id == agent_id, h.decision == "learn")
            .order_by(h.id.desc())
            .limit(1)
        ).first()
        spoke = conn.execute(
            sa.select(h.created_at, h.result_json)
            .where(h.agent_id == agent_id, h.decision == "speak")
            .order_by(h.id.desc())
            .limit(speeches)
        ).all()
    return (
        None if learned is None else LoggedTick(learned.created_at, learned.result_json or {}),
        [LoggedTick(r.created_at, r.result_json or {}) for r in spoke],
    )
