"""An agent's `skills` rows, their kept `skill_versions`, and their effectiveness columns.

Every function runs inside the caller's transaction and returns typed rows. The rules
(which skills an agent gets, who may edit which, how effectiveness is scored) are in
core/skills.py, core/skill_versions.py and core/effectiveness.py.

Example:
    with db.write() as conn:
        insert_skill(conn, skill_id, agent_id, "notes", SkillValues(...), now)
        record_version(conn, skill_id, "created", now, keep=50)
    with db.read() as conn:
        [row] = list_skills(conn, agent_id, active_only=True)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store import advisory
from opencrab.store.prepared import Prepared
from opencrab.store.tables import skill_versions, skills


@dataclass(frozen=True)
class SkillRow:
    """One `skills` row (`actions` and `recent_scores` decoded from their JSON)."""

    id: str
    agent_id: str
    name: str
    description: str
    version: int
    actions: list[str]
    guidance: str
    situation_pattern: str
    source: str
    source_context: str | None
    file_path: str | None
    usage_count: int
    effectiveness: float | None
    recent_scores: list[float]
    is_active: bool
    last_used_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SkillHead:
    """What deciding on a write needs of a skill: id, name, version, source, file."""

    id: str
    name: str
    version: int
    source: str
    file_path: str | None


@dataclass(frozen=True)
class SkillScores:
    """A skill's actions and its recent turn scores, oldest first (for effectiveness);
    the scores are decoded when asked for (a turn scores only the skills it used)."""

    id: str
    name: str
    actions: list[str]
    stored_scores: Any  # the column as the driver gave it: JSON text, a list or None
    effectiveness: float | None = None  # as stored

    @property
    def recent_scores(self) -> list[float]:
        """The recent turn scores, oldest first."""
        scores = self.stored_scores
        if isinstance(scores, str):
            scores = json.loads(scores)
        return [float(s) for s in scores or ()]


@dataclass(frozen=True)
class SkillVersionRow:
    """One kept version of a skill's text."""

    skill_id: str
    version: int
    name: str
    description: str
    situation_pattern: str
    guidance: str
    actions: list[str]
    source: str
    source_context: str | None
    change: str
    created_at: datetime


class SkillValues(TypedDict, total=False):
    """Columns a write sets, by the domain's names (`actions`, `source`)."""

    description: str
    guidance: str
    situation_pattern: str
    version: int
    actions: list[str]
    file_path: str | None
    source: str
    source_context: str | None
    is_active: bool
    effectiveness: float
    updated_at: datetime


_COLUMNS = {"actions": "actions_json", "source": "source_type"}


def _columns(values: SkillValues) -> dict[str, Any]:
    return {_COLUMNS.get(k, k): v for k, v in values.items()}


def _skill(row: Any) -> SkillRow:
    return SkillRow(
        id=str(row.id),
        agent_id=str(row.agent_id),
        name=row.name,
        description=row.description,
        version=row.version,
        actions=list(row.actions_json or []),
        guidance=row.guidance,
        situation_pattern=row.situation_pattern or "",
        source=row.source_type,
        source_context=row.source_context,
        file_path=row.file_path,
        usage_count=row.usage_count,
        effectiveness=row.effectiveness,
        recent_scores=[float(x) for x in row.effectiveness_scores or ()],
        is_active=bool(row.is_active),
        last_used_at=row.last_used_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _head(row: Any) -> SkillHead:
    return SkillHead(str(row.id), row.name, row.version, row.source_type, row.file_path)


# ------------------------------------------------------------------ reading
def list_skills(conn: Connection, agent_id: str, *, active_only: bool = False) -> list[SkillRow]:
    """The agent's skills: standard ones first, then by creation time and name."""
    t = skills.c
    query = sa.select(skills).where(t.agent_id == agent_id)
    if active_only:
        query = query.where(t.is_active.is_(True))
    query = query.order_by((t.source_type != "standard"), t.created_at, t.name)
    return [_skill(row) for row in conn.execute(query)]


def find_skill(conn: Connection, agent_id: str, name_or_id: str) -> SkillRow | None:
    """The agent's skill with this name or id, None when there is none."""
    t = skills.c
    row = conn.execute(
        sa.select(skills).where(
            t.agent_id == agent_id, sa.or_(t.name == name_or_id, t.id == name_or_id)
        )
    ).first()
    return None if row is None else _skill(row)


def skill_by_id(conn: Connection, skill_id: str) -> SkillRow:
    """The skill with this id (it must exist)."""
    return _skill(conn.execute(sa.select(skills).where(skills.c.id == skill_id)).one())


def lock_standard_skills(conn: Connection, agent_id: str) -> None:
    """Serialise copying in an agent's standard skills until the transaction ends: two
    processes starting at once on PostgreSQL both found a skill missing and both inserted
    it (a unique violation stopped one). See opencrab.store.advisory."""
    advisory.hold(conn, [f"opencrab-skills:{agent_id}"])


def skill_heads(conn: Connection, agent_id: str) -> dict[str, SkillHead]:
    """The agent's skills by name, with what deciding on a write needs: one query."""
    t = skills.c
    rows = conn.execute(
        sa.select(t.id, t.name, t.version, t.source_type, t.file_path).where(t.agent_id == agent_id)
    )
    return {r.name: _head(r) for r in rows}


def skill_head_named(conn: Connection, agent_id: str, name: str) -> SkillHead | None:
    """The agent's skill with this exact name (id, version, source), None when none."""
    t = skills.c
    r = conn.execute(
        sa.select(t.id, t.name, t.version, t.source_type, t.file_path).where(
            t.agent_id == agent_id, t.name == name
        )
    ).first()
    return None if r is None else _head(r)


def skills_stamp(conn: Connection, agent_id: str) -> tuple[Any, ...]:
    """(count, newest updated_at) of the agent's skills: what changes when any skill does."""
    return tuple(_SKILLS_STAMP.rows(conn, agent_id=agent_id)[0])


def queue_skills_stamp(conn: Connection, agent_id: str) -> None:
    """Send `skills_stamp`'s read ahead (Prepared.queue: one round trip with others)."""
    _SKILLS_STAMP.queue(conn, agent_id=agent_id)


def active_skill_actions(conn: Connection, agent_id: str) -> list[tuple[str, list[str]]]:
    """(id, actions) of the agent's active skills."""
    t = skills.c
    rows = conn.execute(
        sa.select(t.id, t.actions_json).where(t.agent_id == agent_id, t.is_active.is_(True))
    ).all()
    return [(str(r.id), list(r.actions_json or [])) for r in rows]


def skill_scores(conn: Connection, agent_id: str) -> list[SkillScores]:
    """Every skill of the agent with its actions and recent scores: one query."""
    rows = _SKILL_SCORES.rows(conn, agent_id=agent_id)
    return [
        SkillScores(
            id=str(r.id),
            name=r.name,
            actions=list(r.actions_json or []),
            stored_scores=r.effectiveness_scores,
            effectiveness=r.effectiveness,
        )
        for r in rows
    ]


def skill_counts(conn: Connection, agent_ids: Sequence[str] | None) -> dict[str, tuple[int, int]]:
    """(switched on, standard) skill counts by agent, of these agents or all: one query."""
    s = skills.c
    query = sa.select(
        s.agent_id,
        sa.func.sum(sa.case((s.is_active.is_(True), 1), else_=0)),
        sa.func.sum(sa.case((s.source_type == "standard", 1), else_=0)),
    )
    if agent_ids is not None:
        query = query.where(s.agent_id.in_(agent_ids))
    return {
        str(agent): (int(on or 0), int(standard or 0))
        for agent, on, standard in conn.execute(query.group_by(s.agent_id))
    }


# ------------------------------------------------------------------ writing
def insert_skill(
    conn: Connection,
    skill_id: str,
    agent_id: str,
    name: str,
    values: SkillValues,
    created_at: datetime,
) -> None:
    """Store a new skill (switched on, its use count 0) with these values."""
    conn.execute(
        skills.insert().values(
            {
                "is_active": True,
                **_columns(values),
                "id": skill_id,
                "agent_id": agent_id,
                "name": name,
                "created_at": created_at,
            }
        )
    )


def update_skill(
    conn: Connection, skill_id: str, values: SkillValues, *, at_version: int | None = None
) -> int:
    """Set these values of a skill (only while it is at `at_version`, when given): rows changed."""
    t = skills.c
    query = skills.update().where(t.id == skill_id)
    if at_version is not None:
        query = query.where(t.version == at_version)
    return int(conn.execute(query.values(_columns(values))).rowcount)


def set_scores(
    conn: Connection,
    skill_id: str,
    effectiveness: float,
    scores: list[float],
    *,
    used_at: datetime | None = None,
) -> None:
    """Store a skill's effectiveness and the recent scores it is the mean of; with
    `used_at`, one more use at that time too (`count_use` in the same statement)."""
    if used_at is None:
        _SET_SCORES.run(conn, id=skill_id, value=effectiveness, scores=scores)
    else:
        _SET_SCORES_USED.run(conn, id=skill_id, value=effectiveness, scores=scores, now=used_at)


def count_use(conn: Connection, skill_id: str, now: datetime) -> None:
    """One more use of the skill, at `now`."""
    _COUNT_USE.run(conn, id=skill_id, now=now)


def delete_skill(conn: Connection, skill_id: str) -> None:
    """Delete a skill and its versions."""
    conn.execute(skills.delete().where(skills.c.id == skill_id))


# ------------------------------------------------------------------ versions
def record_version(
    conn: Connection, skill_id: str, change: str, now: datetime, *, keep: int
) -> None:
    """Copy the skill's current text into `skill_versions` as its current version.

    A kept version of the same number is replaced; versions `keep` or more behind go.
    """
    s = skills.c
    row = conn.execute(
        sa.select(
            s.version,
            s.name,
            s.description,
            s.situation_pattern,
            s.guidance,
            s.actions_json,
            s.source_type,
            s.source_context,
        ).where(s.id == skill_id)
    ).one()
    v = skill_versions.c
    conn.execute(
        skill_versions.delete().where(
            v.skill_id == skill_id,
            sa.or_(v.version == row.version, v.version <= row.version - keep),
        )
    )
    conn.execute(
        skill_versions.insert().values(
            skill_id=skill_id,
            version=row.version,
            name=row.name,
            description=row.description,
            situation_pattern=row.situation_pattern or "",
            guidance=row.guidance,
            actions_json=list(row.actions_json or []),
            source_type=row.source_type,
            source_context=row.source_context,
            change=change,
            created_at=now,
        )
    )


def list_versions(conn: Connection, skill_id: str) -> list[SkillVersionRow]:
    """The kept versions of a skill, newest first."""
    v = skill_versions.c
    rows = conn.execute(
        sa.select(skill_versions).where(v.skill_id == skill_id).order_by(v.version.desc())
    ).all()
    return [
        SkillVersionRow(
            skill_id=str(row.skill_id),
            version=row.version,
            name=row.name,
            description=row.description,
            situation_pattern=row.situation_pattern,
            guidance=row.guidance,
            actions=list(row.actions_json or []),
            source=row.source_type,
            source_context=row.source_context,
            change=row.change,
            created_at=row.created_at,
        )
        for row in rows
    ]


_SKILLS_STAMP = Prepared(
    sa.select(sa.func.count(), sa.func.max(skills.c.updated_at)).where(
        skills.c.agent_id == sa.bindparam("agent_id")
    )
)
_COUNT_USE = Prepared(
    skills.update()
    .where(skills.c.id == sa.bindparam("id"))
    .values(usage_count=skills.c.usage_count + 1, last_used_at=sa.bindparam("now"))
)
_SKILL_SCORES = Prepared(
    sa.select(
        skills.c.id,
        skills.c.name,
        skills.c.actions_json,
        # a float from either driver (Float's PostgreSQL processor wants the column's type)
        sa.type_coerce(skills.c.effectiveness, sa.types.NullType()).label("effectiveness"),
        # as stored: decoded by SkillScores for the skills a turn used only
        sa.type_coerce(skills.c.effectiveness_scores, sa.Text).label("effectiveness_scores"),
    )
    .where(skills.c.agent_id == sa.bindparam("agent_id"))
    .order_by(skills.c.id)  # locked in one order by every turn
    # PostgreSQL: rows locked until the scores written from them commit, so two turns of
    # one agent ending at once fold both scores (READ COMMITTED would lose one); SQLite's
    # write transactions run one at a time already (it renders no FOR UPDATE)
    .with_for_update()
)
_SET_SCORES = Prepared(
    skills.update()
    .where(skills.c.id == sa.bindparam("id"))
    .values(effectiveness=sa.bindparam("value"), effectiveness_scores=sa.bindparam("scores"))
)
_SET_SCORES_USED = Prepared(
    skills.update()
    .where(skills.c.id == sa.bindparam("id"))
    .values(
        effectiveness=sa.bindparam("value"),
        effectiveness_scores=sa.bindparam("scores"),
        usage_count=skills.c.usage_count + 1,
        last_used_at=sa.bindparam("now"),
    )
)
