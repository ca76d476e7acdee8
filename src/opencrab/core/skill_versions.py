"""A skill's version history: the text of each version, kept as it is written.

A skill's text (name, description, situation, guidance, actions, source) changes in
four ways, each giving it a version: it is `created`; learned again under its name,
`refined`; `edited` over REST; or its standard skill `file` changed (a newer version,
or the agent's language). `record_version` copies the skill row as it now is into
`skill_versions`, inside the transaction that changed it (SkillManager calls it), so
history and skill never disagree. Switching a skill on or off, its use count and its
effectiveness are not versions. The newest `MAX_VERSIONS` versions of a skill are kept;
a skill's history also starts late when it existed before histories were kept
(revision 0014 recorded each skill's text then, marked `recorded`).

Example:
    with db.write() as conn:
        conn.execute(skills.update()...)            # the skill's new text, version + 1
        record_version(conn, skill_id, "edited")
    list_versions(db, skill_id)                     # newest first
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from opencrab.core.skill_files import SKILL_TEXT, skill_markdown
from opencrab.store import Database
from opencrab.store.tables import skill_versions
from opencrab.store.tables import skills as skills_table

SkillChange = Literal["created", "refined", "edited", "file", "recorded"]
MAX_VERSIONS = 50


class SkillVersion(BaseModel):
    """One version of a skill's text, and what made it."""

    version: int
    name: str
    description: str
    situation_pattern: str
    guidance: str
    actions: list[str]
    source: str
    source_context: str | None = None
    change: SkillChange
    created_at: datetime

    def markdown(self) -> str:
        """This version as a skill file."""
        return skill_markdown(**self.model_dump(include=SKILL_TEXT))


def record_version(
    conn: Connection, skill_id: str, change: SkillChange, now: datetime | None = None
) -> None:
    """Keep the skill's current text as its current version (replacing one of that number)."""
    s = skills_table.c
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
    # a standard skill refreshed for another language keeps its number: that text replaces it
    conn.execute(
        skill_versions.delete().where(
            v.skill_id == skill_id,
            sa.or_(v.version == row.version, v.version <= row.version - MAX_VERSIONS),
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
            created_at=now or datetime.now(UTC),
        )
    )


def list_versions(db: Database, skill_id: str) -> list[SkillVersion]:
    """The kept versions of a skill, newest first."""
    v = skill_versions.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(skill_versions).where(v.skill_id == skill_id).order_by(v.version.desc())
        ).all()
    return [
        SkillVersion(
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
