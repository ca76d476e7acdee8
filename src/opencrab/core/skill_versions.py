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

The rows are read and written through store/repositories/skills.py.

Example:
    with db.write() as conn:
        update_skill(conn, skill_id, {...})         # the skill's new text, version + 1
        record_version(conn, skill_id, "edited")
    list_versions(db, skill_id)                     # newest first
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, cast

from pydantic import BaseModel
from sqlalchemy.engine import Connection

from opencrab.core.skill_files import SKILL_TEXT, skill_markdown
from opencrab.store import Database
from opencrab.store.repositories import skills as repo

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
    # a standard skill refreshed for another language keeps its number: that text replaces it
    repo.record_version(conn, skill_id, change, now or datetime.now(UTC), keep=MAX_VERSIONS)


def list_versions(db: Database, skill_id: str) -> list[SkillVersion]:
    """The kept versions of a skill, newest first."""
    with db.read() as conn:
        rows = repo.list_versions(conn, skill_id)
    return [
        SkillVersion(
            version=row.version,
            name=row.name,
            description=row.description,
            situation_pattern=row.situation_pattern,
            guidance=row.guidance,
            actions=row.actions,
            source=row.source,
            source_context=row.source_context,
            change=cast(SkillChange, row.change),
            created_at=row.created_at,
        )
        for row in rows
    ]
