"""SkillManager (seed 001 "Skill"): the manuals an agent follows and the actions they unlock.

Standard skills are `*.skill.md` files (core/skill_files.py: YAML frontmatter and a
Markdown body, the guidance). OpenCrab ships the five of seed 001 in each language,
`opencrab/skills/<language>/` (en, ja = the seed's text, zh; same names and actions in
all three); plugins add folders through the `register_skill_dirs` hook and operators
drop files into `{data_dir}/skills/`. In every folder, files in the `<language>/`
subfolder come first, then files in the folder itself (for any language). A malformed
file is reported (file, line, reason) and skipped; it never stops start-up. Files and
folders reached through a symlink are skipped the same way: a link could make a file
someone else can write (an agent's workspace) a skill file the operator never saw.

Every agent has its own rows in `skills`: the standard skills of its language are copied
in (and kept in step with their files' versions and language) by
`ensure_default_skills`, and skills the agent
acquires (from experience, a peer, research or reflection) are added beside them. Each
row can be switched off, counts its uses and carries an effectiveness score, computed
from the outcomes of the turns in which its actions ran (core/effectiveness.py). Every
version of a skill's text is kept (core/skill_versions.py). The actions an agent may
call come from its active standard skills and granted tools; a learned skill's
`actions` add nothing (core/permissions.py). The rows are read and written through
store/repositories/skills.py.

Example:
    docs, problems = load_skill_dirs(standard_skill_dirs(settings), "ja")
    skills = SkillManager(db, agent_id, docs)
    skills.ensure_default_skills()
    active = skills.get_active_skills()
    skills.build_context(active, "ja")  # "【利用可能なスキル】\\n\\n## autonomous\\n…"
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast
from uuid import uuid4

from pydantic import BaseModel
from sqlalchemy.engine import Connection

from opencrab.core.skill_files import ACTION_NAME, SKILL_TEXT, SkillDoc, skill_markdown
from opencrab.core.skill_versions import SkillVersion, list_versions, record_version
from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.plugins import hookimpl
from opencrab.prompts import LANGUAGES, Language, prompts
from opencrab.store import Database
from opencrab.store.repositories import skills as repo
from opencrab.store.repositories.skills import SkillRow, SkillValues

if TYPE_CHECKING:
    from opencrab.config import Settings
    from opencrab.core.effectiveness import TurnFacts
    from opencrab.llm.types import ToolDefinition

log = logging.getLogger(__name__)

SkillSource = Literal["standard", "experience", "peer", "research", "reflection"]
ACQUIRED_SOURCES = ("experience", "peer", "research", "reflection")
PACKAGED_DIR = Path(__file__).resolve().parent.parent / "skills"


def standard_skill_dirs(settings: Settings | None = None) -> list[Path]:
    """Folders of standard skills: from plugins (OpenCrab's own first), then the data dir's."""
    from opencrab.plugins import plugin_manager

    dirs: list[Path] = []
    for found in plugin_manager().hook.register_skill_dirs():
        dirs.extend(Path(p) for p in found)
    if settings is not None:
        dirs.append(Path(settings.data_dir) / "skills")
    return list(dict.fromkeys(dirs))


@hookimpl
def register_skill_dirs() -> list[Path]:
    return [PACKAGED_DIR]


class ActionDefinitions(Protocol):
    """What skills ask of the action registry: actions.base.ActionRegistry is one (a
    protocol, so that this module, which actions/base.py imports for
    `ActionContext.skills`, does not import that back)."""

    def definitions(self, names: Iterable[str] | None = None) -> list[ToolDefinition]:
        """Tool definitions for `names` (every action when None), sorted by name."""
        ...


# ------------------------------------------------------------------ per-agent skills
_ACTIVE_CACHE: dict[tuple[int, str], tuple[tuple[Any, ...], list[Skill]]] = {}


class Skill(BaseModel):
    """One of an agent's skills (seed `Skill`, with the table's bookkeeping)."""

    id: str
    name: str
    description: str
    version: int = 1
    actions: list[str]
    guidance: str
    situation_pattern: str = ""
    source: SkillSource
    source_context: str | None = None
    file_path: str | None = None
    usage_count: int = 0
    effectiveness: float | None = None
    recent_scores: list[float] = []  # the scores of its latest turns, oldest first
    is_active: bool = True
    last_used_at: datetime | None = None
    created_at: datetime
    updated_at: datetime

    def markdown(self) -> str:
        """The skill as a skill file: its frontmatter, and its guidance as the body."""
        return skill_markdown(**self.model_dump(include=SKILL_TEXT))


class SkillManager:
    """One agent's skills; see the module docstring."""

    def __init__(self, db: Database, agent_id: str, docs: Sequence[SkillDoc] = ()) -> None:
        self.db = db
        self.agent_id = str(agent_id)
        self.docs = list(docs)

    def ensure_default_skills(self) -> None:
        """Copy in the standard skills the agent lacks; refresh those whose file is newer
        or in another language (the agent's language changed)."""
        now = datetime.now(UTC)
        with self.db.write() as conn:
            repo.lock_standard_skills(conn, self.agent_id)
            have = repo.skill_heads(conn, self.agent_id)
            for doc in self.docs:
                row = have.get(doc.name)
                values = cast(SkillValues, {**_doc_values(doc), "updated_at": now})
                if row is None:
                    skill_id = str(uuid4())
                    repo.insert_skill(
                        conn,
                        skill_id,
                        self.agent_id,
                        doc.name,
                        {**values, "source": "standard"},
                        now,
                    )
                    record_version(conn, skill_id, "created", now)
                elif row.source == "standard" and _stale_file(row.version, row.file_path, doc):
                    repo.update_skill(conn, row.id, values)
                    record_version(conn, row.id, "file", now)

    # ------------------------------------------------------------ reading
    def list(self, *, active_only: bool = False) -> builtins.list[Skill]:
        """The agent's skills (only the active ones, if asked): standard ones first."""
        with self.db.read() as conn:
            rows = repo.list_skills(conn, self.agent_id, active_only=active_only)
        return [_skill(row) for row in rows]

    def get_active_skills(self) -> builtins.list[Skill]:
        """The active skills; reused while the agent's skill rows are unchanged.

        Every change (acquire, update, toggle, delete, a refreshed standard skill) moves
        `updated_at` or the row count, which one cheap aggregate query compares; usage
        counts and computed effectiveness are not part of what a turn needs.
        """
        with self.db.read() as conn:
            stamp = repo.skills_stamp(conn, self.agent_id)
        key = (id(self.db), self.agent_id)
        cached = _ACTIVE_CACHE.get(key)
        if cached is not None and cached[0] == stamp:
            return list(cached[1])
        skills = self.list(active_only=True)
        if len(_ACTIVE_CACHE) > 4096:
            _ACTIVE_CACHE.clear()
        _ACTIVE_CACHE[key] = (stamp, skills)
        return list(skills)

    def get(self, name_or_id: str) -> Skill:
        """The agent's skill with this name or id; NotFoundError when it has none."""
        with self.db.read() as conn:
            row = repo.find_skill(conn, self.agent_id, name_or_id)
        if row is None:
            raise NotFoundError(f"no skill {name_or_id!r} for this agent")
        return _skill(row)

    @staticmethod
    def action_names(skills: Iterable[Skill]) -> builtins.list[str]:
        """The actions the skills offer, in order, without repeats."""
        return list(dict.fromkeys(a for skill in skills for a in skill.actions))

    def build_action_definitions(
        self, skills: Iterable[Skill], registry: ActionDefinitions
    ) -> builtins.list[ToolDefinition]:
        """Function-calling definitions of the skills' actions the registry knows."""
        return registry.definitions(self.action_names(skills))

    @staticmethod
    def build_context(skills: Sequence[Skill], language: Language) -> str:
        """The 【利用可能なスキル】 section in `language`: name, description, manual of each."""
        texts = prompts(language)
        parts = [texts["skills_header"]]
        for skill in skills:
            parts.append(f"\n## {skill.name}\n{skill.description}\n")
            if skill.situation_pattern:
                parts.append(texts.render("skills_situation", situation=skill.situation_pattern))
            if skill.guidance and skill.guidance != skill.description:
                parts.append(f"\n{skill.guidance}\n")
        return "".join(parts)

    # ------------------------------------------------------------ changing
    def acquire(
        self,
        *,
        name: str,
        description: str,
        guidance: str,
        source: str,
        situation_pattern: str = "",
        source_context: str | None = None,
        actions: Sequence[str] = (),
        conn: Connection | None = None,
    ) -> Skill:
        """Add a learned skill; a name the agent already learned is refined (version + 1).

        A name that belongs to a standard skill is refused with ConflictError.
        """
        name = " ".join(name.split())[:100]
        if not name:
            raise ValidationError("a skill needs a name")
        if source not in ACQUIRED_SOURCES:
            raise ValidationError(
                f"skill source {source!r} is not one of {', '.join(ACQUIRED_SOURCES)}"
            )
        if not description.strip() or not guidance.strip():
            raise ValidationError("a skill needs a description and guidance")
        bad = [a for a in actions if not ACTION_NAME.match(a)]
        if bad:
            raise ValidationError(f"invalid action names {bad}")
        now = datetime.now(UTC)
        values: SkillValues = {
            "description": description.strip(),
            "guidance": guidance.strip(),
            "situation_pattern": situation_pattern.strip(),
            "source": source,
            "source_context": source_context,
            "actions": list(dict.fromkeys(actions)),
            "updated_at": now,
        }

        def write(c: Connection) -> str:
            row = repo.skill_head_named(c, self.agent_id, name)
            if row is None:
                skill_id = str(uuid4())
                repo.insert_skill(c, skill_id, self.agent_id, name, {**values, "version": 1}, now)
                record_version(c, skill_id, "created", now)
                return skill_id
            if row.source == "standard":
                raise ConflictError(f"{name!r} is a standard skill; learn under another name")
            repo.update_skill(c, row.id, {**values, "version": row.version + 1})
            record_version(c, row.id, "refined", now)
            return row.id

        if conn is not None:
            skill_id = write(conn)
            return _skill(repo.skill_by_id(conn, skill_id))
        with self.db.write() as own:
            skill_id = write(own)
        return self.get(skill_id)

    def update(
        self,
        name_or_id: str,
        *,
        description: str | None = None,
        guidance: str | None = None,
        situation_pattern: str | None = None,
        actions: Sequence[str] | None = None,
        expected_version: int | None = None,
    ) -> Skill:
        """Edit an acquired skill (standard skills change through their files).

        The edit applies to the version read: if the skill changed meanwhile (another
        edit, or the agent refined it), or is not at `expected_version`, ConflictError.
        """
        skill = self.get(name_or_id)
        if skill.source == "standard":
            raise ConflictError(f"{skill.name!r} is a standard skill; edit its file instead")
        if expected_version is not None and expected_version != skill.version:
            raise ConflictError(_stale(skill, expected_version))
        now = datetime.now(UTC)
        values: SkillValues = {"updated_at": now, "version": skill.version + 1}
        if description is not None:
            values["description"] = description
        if guidance is not None:
            values["guidance"] = guidance
        if situation_pattern is not None:
            values["situation_pattern"] = situation_pattern
        if actions is not None:
            values["actions"] = list(dict.fromkeys(actions))
        with self.db.write() as conn:
            done = repo.update_skill(conn, skill.id, values, at_version=skill.version)
            if done != 1:
                raise ConflictError(_stale(skill, skill.version))
            record_version(conn, skill.id, "edited", now)
        return self.get(skill.id)

    def versions(self, name_or_id: str) -> builtins.list[SkillVersion]:
        """The kept versions of one of the agent's skills, newest first."""
        return list_versions(self.db, self.get(name_or_id).id)

    def delete(self, name_or_id: str) -> None:
        """Forget an acquired skill; a standard skill can only be switched off."""
        skill = self.get(name_or_id)
        if skill.source == "standard":
            raise ConflictError(f"{skill.name!r} is a standard skill; switch it off instead")
        with self.db.write() as conn:
            repo.delete_skill(conn, skill.id)

    def toggle(self, name_or_id: str, active: bool | None = None) -> Skill:
        """Switch a skill on or off (flip it when `active` is None)."""
        skill = self.get(name_or_id)
        value = (not skill.is_active) if active is None else active
        with self.db.write() as conn:
            repo.update_skill(conn, skill.id, {"is_active": value, "updated_at": datetime.now(UTC)})
        return self.get(skill.id)

    def increment_usage(self, name_or_id: str) -> None:
        """Count one use of the skill, now."""
        skill = self.get(name_or_id)
        with self.db.write() as conn:
            repo.count_use(conn, skill.id, datetime.now(UTC))

    def record_action_use(
        self,
        action_name: str,
        *,
        conn: Connection | None = None,
        active: Sequence[Skill] | None = None,
    ) -> int:
        """Count one use for every active skill offering `action_name`; returns how many.

        `active` (the caller's current list of active skills) saves reading them again.
        """

        def run(c: Connection) -> int:
            if active is not None:
                ids = self.offering(action_name, active)
            else:
                rows = repo.active_skill_actions(c, self.agent_id)
                ids = tuple(skill_id for skill_id, actions in rows if action_name in actions)
            now = datetime.now(UTC)
            for skill_id in ids:
                repo.count_use(c, skill_id, now)
            return len(ids)

        if conn is not None:
            return run(conn)
        with self.db.write() as own:
            return run(own)

    @staticmethod
    def offering(action_name: str, active: Sequence[Skill]) -> tuple[str, ...]:
        """The ids of the skills among `active` that offer `action_name`."""
        return tuple(s.id for s in active if action_name in s.actions)

    def record_turn(self, facts: TurnFacts) -> dict[str, float]:
        """Fold a finished turn's outcome into the effectiveness of the skills it used."""
        from opencrab.core.effectiveness import record_turn

        return record_turn(self.db, self.agent_id, facts)

    def set_effectiveness(self, name_or_id: str, value: float) -> Skill:
        """Set a skill's effectiveness (0 to 1) by hand."""
        if not 0.0 <= value <= 1.0:
            raise ValidationError("effectiveness must be between 0 and 1")
        skill = self.get(name_or_id)
        with self.db.write() as conn:
            repo.update_skill(
                conn, skill.id, {"effectiveness": value, "updated_at": datetime.now(UTC)}
            )
        return self.get(skill.id)


class PlannedSkills(SkillManager):
    """An agent's skills as `ensure_default_skills` would leave them, never written: for a
    request built ahead of a change (a persona preview in a language not saved yet)."""

    def get_active_skills(self) -> builtins.list[Skill]:
        """The active skills as `ensure_default_skills` would leave them; nothing written."""
        now = datetime.now(UTC)
        docs = {d.name: d for d in self.docs}
        planned: builtins.list[Skill] = []
        for skill in self.list():
            doc = docs.pop(skill.name, None)
            standard = skill.source == "standard"
            if doc is not None and standard and _stale_file(skill.version, skill.file_path, doc):
                skill = skill.model_copy(update=_doc_values(doc))
            planned.append(skill)
        planned += [
            Skill(
                id=str(uuid4()),
                name=d.name,
                source="standard",
                created_at=now,
                updated_at=now,
                **_doc_values(d),
            )
            for d in docs.values()  # the ones the agent lacks
        ]
        planned.sort(key=lambda s: (s.source != "standard", s.created_at, s.name))
        return [s for s in planned if s.is_active]


def _doc_values(doc: SkillDoc) -> dict[str, Any]:
    """What a standard skill takes from its file."""
    return {
        "description": doc.description,
        "guidance": doc.guidance,
        "situation_pattern": doc.situation_pattern,
        "version": doc.version,
        "actions": list(doc.actions),
        "file_path": doc.file_path,
    }


def _stale_file(version: int, file_path: str | None, doc: SkillDoc) -> bool:
    """Whether a stored standard skill is refreshed from `doc`: newer, or another language."""
    return version < doc.version or _language_of(file_path) != _language_of(doc.file_path)


def _stale(skill: Skill, version: int) -> str:
    return (
        f"skill {skill.name!r} changed since version {version} was read (it is at version "
        f"{skill.version} or later now); nothing was stored: reload it and edit again"
    )


def _language_of(file_path: str | None) -> str | None:
    """The language folder a skill file is in (`…/ja/x.skill.md` → "ja"), else None."""
    if not file_path:
        return None
    folder = Path(file_path).parent.name
    return folder if folder in LANGUAGES else None


def _skill(row: SkillRow) -> Skill:
    return Skill(
        id=row.id,
        name=row.name,
        description=row.description,
        version=row.version,
        actions=row.actions,
        guidance=row.guidance,
        situation_pattern=row.situation_pattern,
        source=cast(SkillSource, row.source),
        source_context=row.source_context,
        file_path=row.file_path,
        usage_count=row.usage_count,
        effectiveness=row.effectiveness,
        recent_scores=row.recent_scores,
        is_active=row.is_active,
        last_used_at=row.last_used_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
