"""Read-only aggregates for the analytics charts, per agent or for the whole fleet.

Days are UTC dates (`YYYY-MM-DD`) on every database (`store.dialects.<name>.utc_day`).
`agent_id=None` means every agent. These queries only read; each table keeps its one
writer in its own repository.

Example:
    with db.read() as conn:
        rows = speech_by_day(conn, agent_id=None, since=None)  # [(day, agent_id, n), ...]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.dialects import postgresql, sqlite
from opencrab.store.tables import (
    heartbeat_log,
    impressions,
    memory_sessions,
    messages,
    sessions,
    skill_versions,
    skills,
)

DayCount = tuple[str, str, int]
"""(UTC day, key, count): the key is an agent id, a decision or a kind of change."""


def _day(conn: Connection, column: Any) -> Any:
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    return dialect.utc_day(column)


def _after(column: Any, since: datetime | None) -> Any:
    return sa.true() if since is None else column >= since


def _of(column: Any, agent_id: str | None) -> Any:
    return sa.true() if agent_id is None else column == agent_id


def _counted(conn: Connection, query: Any) -> list[DayCount]:
    return [(str(day), str(key), int(n)) for day, key, n in conn.execute(query)]


def speech_by_day(
    conn: Connection, *, agent_id: str | None, since: datetime | None
) -> list[DayCount]:
    """Lines the agents spoke per UTC day and agent id: their own memory `speech` logs,
    not the lines they heard (a user's, an operator's, another agent's in a discussion)."""
    m = memory_sessions.c
    day = _day(conn, m.created_at).label("day")
    own = sa.and_(m.log_type == "speech", m.speaker_id == m.agent_id)
    query = (
        sa.select(day, m.agent_id, sa.func.count())
        .where(own, _of(m.agent_id, agent_id), _after(m.created_at, since))
        .group_by(day, m.agent_id)
        .order_by(day, m.agent_id)
    )
    return _counted(conn, query)


def heartbeats_by_day(
    conn: Connection, *, agent_id: str | None, since: datetime | None
) -> list[DayCount]:
    """Heartbeat ticks per UTC day and decision (speak, learn, idle, skip)."""
    h = heartbeat_log.c
    day = _day(conn, h.created_at).label("day")
    query = (
        sa.select(day, h.decision, sa.func.count())
        .where(_of(h.agent_id, agent_id), _after(h.created_at, since))
        .group_by(day, h.decision)
        .order_by(day, h.decision)
    )
    return _counted(conn, query)


def skill_changes_by_day(
    conn: Connection, *, agent_id: str | None, since: datetime | None
) -> list[DayCount]:
    """Skill versions the agents wrote per UTC day and kind of change (created, refined, ...).

    Standard skills (installed with OpenCrab, not learned) are left out.
    """
    v, s = skill_versions.c, skills.c
    day = _day(conn, v.created_at).label("day")
    query = (
        sa.select(day, v.change, sa.func.count())
        .join(skills, s.id == v.skill_id)
        .where(v.source_type != "standard", _of(s.agent_id, agent_id), _after(v.created_at, since))
        .group_by(day, v.change)
        .order_by(day, v.change)
    )
    return _counted(conn, query)


def actions_by_day(
    conn: Connection, *, agent_id: str | None, since: datetime | None
) -> list[DayCount]:
    """Actions run per UTC day and action name (from the agents' `action` log lines)."""
    m = memory_sessions.c
    day = _day(conn, m.created_at).label("day")
    query = sa.select(day, m.metadata_json).where(
        m.log_type == "action", _of(m.agent_id, agent_id), _after(m.created_at, since)
    )
    counts: Counter[tuple[str, str]] = Counter()
    for when, meta in conn.execute(query):
        if isinstance(meta, dict) and isinstance(meta.get("action"), str):
            counts[(str(when), meta["action"])] += 1
    return [(d, name, n) for (d, name), n in sorted(counts.items())]


@dataclass(frozen=True)
class SkillTotals:
    """One skill name's use across the agents that have it."""

    name: str
    agents: int
    active: int
    usage_count: int
    effectiveness: float | None  # the mean over the agents that have a score
    actions: list[str]


def skill_totals(conn: Connection, *, agent_id: str | None) -> list[SkillTotals]:
    """Every skill name's use and mean effectiveness, most used first."""
    s = skills.c
    rows = conn.execute(
        sa.select(s.name, s.is_active, s.usage_count, s.effectiveness, s.actions_json).where(
            _of(s.agent_id, agent_id)
        )
    )
    found: dict[str, dict[str, Any]] = {}
    for name, active, used, score, actions in rows:
        entry = found.setdefault(
            name, {"agents": 0, "active": 0, "used": 0, "scores": [], "actions": set()}
        )
        entry["agents"] += 1
        entry["active"] += 1 if active else 0
        entry["used"] += int(used or 0)
        if score is not None:
            entry["scores"].append(float(score))
        entry["actions"].update(a for a in actions or [] if isinstance(a, str))
    totals = [
        SkillTotals(
            name=name,
            agents=e["agents"],
            active=e["active"],
            usage_count=e["used"],
            effectiveness=sum(e["scores"]) / len(e["scores"]) if e["scores"] else None,
            actions=sorted(e["actions"]),
        )
        for name, e in found.items()
    ]
    totals.sort(key=lambda t: (-t.usage_count, t.name))
    return totals


@dataclass(frozen=True)
class ImpressionRow:
    """One agent's impression of another participant in one session."""

    id: str
    agent_id: str
    session_id: str
    target_id: str
    target_name: str
    personality: str
    communication_style: str
    recent_behavior: str
    agreement: str
    notes: str
    updated_at: datetime


def impression_rows(conn: Connection, *, since: datetime | None) -> list[ImpressionRow]:
    """Every agent's impressions (updated in the period), oldest first."""
    i = impressions.c
    rows = conn.execute(
        sa.select(
            i.id,
            i.agent_id,
            i.session_id,
            i.target_id,
            i.target_name,
            i.personality,
            i.communication_style,
            i.recent_behavior,
            i.agreement,
            i.notes,
            i.updated_at,
        )
        .where(_after(i.updated_at, since))
        .order_by(i.updated_at, i.id)
    )
    return [
        ImpressionRow(
            id=str(r.id),
            agent_id=str(r.agent_id),
            session_id=str(r.session_id),
            target_id=r.target_id,
            target_name=r.target_name,
            personality=r.personality or "",
            communication_style=r.communication_style or "",
            recent_behavior=r.recent_behavior or "",
            agreement=r.agreement or "",
            notes=r.notes or "",
            updated_at=r.updated_at,
        )
        for r in rows
    ]


def discussion_replies(conn: Connection, *, since: datetime | None) -> Counter[tuple[str, str]]:
    """Who answered whom in discussions: (speaker, previous speaker) -> how often.

    Each message an agent spoke in a discussion session counts as said to the speaker of
    the message before it in that session, when that was somebody else.
    """
    msg, s = messages.c, sessions.c
    rows = conn.execute(
        sa.select(msg.session_id, msg.speaker_id)
        .join(sessions, s.id == msg.session_id)
        .where(s.kind == "discussion", _after(msg.timestamp, since))
        .order_by(msg.session_id, msg.id)
    )
    replies: Counter[tuple[str, str]] = Counter()
    session: str | None = None
    previous: str | None = None
    for session_id, speaker in rows:
        if session_id != session:
            session, previous = session_id, None
        if speaker and previous and speaker != previous:
            replies[(str(speaker), str(previous))] += 1
        previous = speaker or previous
    return replies
