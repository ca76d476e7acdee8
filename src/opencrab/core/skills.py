"""SkillManager (seed 001 "Skill"): the manuals an agent follows and the actions they unlock.

Standard skills are `*.skill.md` files: YAML frontmatter (name, description, version,
actions) and a Markdown body, the guidance. OpenCrab ships the five of seed 001 in each
language, `opencrab/skills/<language>/` (en, ja = the seed's text, zh; same names and
actions in all three); plugins add folders through the `register_skill_dirs` hook and
operators drop files into `{data_dir}/skills/`. In every folder, files in the
`<language>/` subfolder come first, then files in the folder itself (for any language).
A malformed file is reported (file, line, reason) and skipped; it never stops start-up.
Files and folders reached through a symlink are skipped the same way: a link could make
a file someone else can write (an agent's workspace) a skill file the operator never saw.

Every agent has its own rows in `skills`: the standard skills of its language are copied
in (and kept in step with their files' versions and language) by
`ensure_default_skills`, and skills the agent
acquires (from experience, a peer, research or reflection) are added beside them. Each
row can be switched off, counts its uses and carries an effectiveness score, computed
from the outcomes of the turns in which its actions ran (core/effectiveness.py). The
actions an agent may call come from its active standard skills and granted tools; a
learned skill's `actions` add nothing (core/permissions.py).

Example:
    docs, problems = load_skill_dirs(standard_skill_dirs(settings), "ja")
    skills = SkillManager(db, agent_id, docs)
    skills.ensure_default_skills()
    active = skills.get_active_skills()
    skills.build_context(active, "ja")  # "【利用可能なスキル】\\n\\n## autonomous\\n…"
"""

from __future__ import annotations

import builtins
import errno
import logging
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from uuid import uuid4

import sqlalchemy as sa
import yaml
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from opencrab.errors import ConflictError, NotFoundError, SkillFileError, ValidationError
from opencrab.plugins import hookimpl
from opencrab.prompts import LANGUAGES, Language, prompts
from opencrab.store import Database
from opencrab.store.prepared import Prepared
from opencrab.store.tables import skills as skills_table

if TYPE_CHECKING:  # import cycles at runtime
    from opencrab.actions.base import ActionRegistry
    from opencrab.config import Settings
    from opencrab.core.effectiveness import TurnFacts
    from opencrab.llm.types import ToolDefinition

log = logging.getLogger(__name__)

SkillSource = Literal["standard", "experience", "peer", "research", "reflection"]
ACQUIRED_SOURCES = ("experience", "peer", "research", "reflection")
PACKAGED_DIR = Path(__file__).resolve().parent.parent / "skills"
SUFFIX = ".skill.md"
MAX_SKILL_FILE_BYTES = 256 * 1024
SYMLINKED = "is a symlink; skill files reached through a symlink are not loaded"
_NAME = re.compile(r"^[\w][\w .+\-()]{0,99}$", re.UNICODE)
_ACTION = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


# ------------------------------------------------------------------ skill files
@dataclass(frozen=True)
class SkillDoc:
    """A parsed skill file."""

    name: str
    description: str
    version: int
    actions: tuple[str, ...]
    guidance: str
    file_path: str


@dataclass(frozen=True)
class SkillProblem:
    """A skill file that was skipped, and why."""

    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        return str(SkillFileError(self.file, self.line, self.reason))


def parse_skill_text(text: str, file: str = "<text>") -> SkillDoc:
    """Parse one skill file's text; SkillFileError names the file, line and reason."""
    if "\x00" in text:
        raise SkillFileError(file, None, "contains a NUL byte; not a text file")
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFileError(file, 1, "must start with a '---' line opening the YAML frontmatter")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillFileError(file, len(lines), "the frontmatter is never closed by '---'") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillFileError(file, line, f"invalid YAML in the frontmatter: {problem}") from None
    if not isinstance(meta, dict):
        raise SkillFileError(file, 2, "the frontmatter must be a mapping of keys to values")

    def line_of(key: str) -> int:
        for i in range(1, end):
            if lines[i].startswith(f"{key}:"):
                return i + 1
        return 2

    unknown = sorted(set(meta) - {"name", "description", "version", "actions"}, key=str)
    if unknown:
        raise SkillFileError(file, line_of(unknown[0]), f"unknown frontmatter key {unknown[0]!r}")
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.match(name.strip()):
        raise SkillFileError(
            file, line_of("name"), "name must be text of 1 to 100 letters, digits, ' .+-_()'"
        )
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFileError(file, line_of("description"), "description must be non-empty text")
    version = meta.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SkillFileError(file, line_of("version"), "version must be a whole number ≥ 1")
    actions = meta.get("actions", [])
    if actions is None:
        actions = []
    if not isinstance(actions, list) or not all(
        isinstance(a, str) and _ACTION.match(a) for a in actions
    ):
        raise SkillFileError(
            file, line_of("actions"), "actions must be a list of action names (snake_case)"
        )
    guidance = "\n".join(lines[end + 1 :]).strip()
    if not guidance:
        raise SkillFileError(file, end + 2, "the body (the skill's guidance) is empty")
    return SkillDoc(
        name=name.strip(),
        description=description.strip(),
        version=version,
        actions=tuple(dict.fromkeys(actions)),
        guidance=guidance,
        file_path=file,
    )


def parse_skill_file(path: Path) -> SkillDoc:
    """Parse one skill file; a symlink, a non-regular or over-large file is refused."""
    if path.is_symlink():
        raise SkillFileError(str(path), None, SYMLINKED)
    try:
        # O_NOFOLLOW: a symlink swapped in after the check is refused too (ELOOP);
        # O_NONBLOCK: a FIFO named *.skill.md cannot hang start-up
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SkillFileError(str(path), None, SYMLINKED) from None
        raise SkillFileError(str(path), None, f"cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SkillFileError(str(path), None, "cannot be read: not a regular file")
        if info.st_size > MAX_SKILL_FILE_BYTES:
            raise SkillFileError(
                str(path), None, f"{info.st_size} bytes; skill files are at most 256 KiB"
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_SKILL_FILE_BYTES + 1)
    except OSError as exc:
        raise SkillFileError(str(path), None, f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFileError(str(path), None, f"not UTF-8 text ({exc.reason})") from None
    return parse_skill_text(text, str(path))


def load_skill_dirs(
    dirs: Iterable[Path], language: Language | None = None
) -> tuple[list[SkillDoc], list[SkillProblem]]:
    """Every good skill file under `dirs` (first name wins), and the skipped ones.

    With a `language`, each folder's `<language>/` subfolder is read before the folder.
    """
    docs: dict[str, SkillDoc] = {}
    problems: list[SkillProblem] = []
    folders: list[Path] = []
    for root in dirs:
        subfolders = [root / language, root] if language else [root]
        for folder in [root] if root.is_symlink() else subfolders:
            if folder.is_symlink():  # a linked root: its subfolder is reached through it too
                problems.append(SkillProblem(str(folder), None, SYMLINKED))
                log.warning("skill folder skipped: %s: %s", folder, SYMLINKED)
            elif folder.is_dir():
                folders.append(folder)
    for folder in folders:
        for path in sorted(folder.glob(f"*{SUFFIX}")):
            try:
                doc = parse_skill_file(path)
            except SkillFileError as exc:
                problems.append(SkillProblem(exc.file, exc.line, exc.reason))
                log.warning("skill file skipped: %s", exc)
                continue
            if doc.name in docs:
                reason = f"skill {doc.name!r} is already defined by {docs[doc.name].file_path}"
                problems.append(SkillProblem(str(path), 2, reason))
                log.warning("skill file skipped: %s: %s", path, reason)
                continue
            docs[doc.name] = doc
    return list(docs.values()), problems


def load_standard_skills(
    dirs: Sequence[Path],
) -> tuple[dict[Language, list[SkillDoc]], list[SkillProblem]]:
    """The skills of `dirs` for every language, and the skipped files (each once)."""
    by_language: dict[Language, list[SkillDoc]] = {}
    problems: dict[tuple[str, int | None, str], SkillProblem] = {}
    for language in LANGUAGES:
        docs, found = load_skill_dirs(dirs, language)
        by_language[language] = docs
        problems.update(((p.file, p.line, p.reason), p) for p in found)
    return by_language, list(problems.values())


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
    is_active: bool = True
    last_used_at: datetime | None = None
    created_at: datetime
    updated_at: datetime


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
        t = skills_table.c
        with self.db.write() as conn:
            have = {
                row.name: row
                for row in conn.execute(
                    sa.select(t.id, t.name, t.version, t.source_type, t.file_path).where(
                        t.agent_id == self.agent_id
                    )
                )
            }
            for doc in self.docs:
                row = have.get(doc.name)
                values = _doc_values(doc)
                values["actions_json"] = values.pop("actions")
                values["updated_at"] = now
                if row is None:
                    conn.execute(
                        skills_table.insert().values(
                            id=str(uuid4()),
                            agent_id=self.agent_id,
                            name=doc.name,
                            situation_pattern="",
                            source_type="standard",
                            created_at=now,
                            **values,
                        )
                    )
                elif row.source_type == "standard" and _stale(row.version, row.file_path, doc):
                    conn.execute(skills_table.update().where(t.id == row.id).values(**values))

    # ------------------------------------------------------------ reading
    def list(self, *, active_only: bool = False) -> builtins.list[Skill]:
        t = skills_table.c
        query = sa.select(skills_table).where(t.agent_id == self.agent_id)
        if active_only:
            query = query.where(t.is_active.is_(True))
        query = query.order_by((t.source_type != "standard"), t.created_at, t.name)
        with self.db.read() as conn:
            return [_skill(row) for row in conn.execute(query)]

    def get_active_skills(self) -> builtins.list[Skill]:
        """The active skills; reused while the agent's skill rows are unchanged.

        Every change (acquire, update, toggle, delete, a refreshed standard skill) moves
        `updated_at` or the row count, which one cheap aggregate query compares; usage
        counts and computed effectiveness are not part of what a turn needs.
        """
        with self.db.read() as conn:
            stamp = tuple(_SKILLS_STAMP.rows(conn, agent_id=self.agent_id)[0])
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
        t = skills_table.c
        with self.db.read() as conn:
            row = conn.execute(
                sa.select(skills_table).where(
                    t.agent_id == self.agent_id,
                    sa.or_(t.name == name_or_id, t.id == name_or_id),
                )
            ).first()
        if row is None:
            raise NotFoundError(f"no skill {name_or_id!r} for this agent")
        return _skill(row)

    @staticmethod
    def action_names(skills: Iterable[Skill]) -> builtins.list[str]:
        """The actions the skills offer, in order, without repeats."""
        return list(dict.fromkeys(a for skill in skills for a in skill.actions))

    def build_action_definitions(
        self, skills: Iterable[Skill], registry: ActionRegistry
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
        bad = [a for a in actions if not _ACTION.match(a)]
        if bad:
            raise ValidationError(f"invalid action names {bad}")
        now = datetime.now(UTC)
        t = skills_table.c
        values = {
            "description": description.strip(),
            "guidance": guidance.strip(),
            "situation_pattern": situation_pattern.strip(),
            "source_type": source,
            "source_context": source_context,
            "actions_json": list(dict.fromkeys(actions)),
            "updated_at": now,
        }

        def write(c: Connection) -> str:
            row = c.execute(
                sa.select(t.id, t.source_type, t.version).where(
                    t.agent_id == self.agent_id, t.name == name
                )
            ).first()
            if row is None:
                skill_id = str(uuid4())
                c.execute(
                    skills_table.insert().values(
                        id=skill_id,
                        agent_id=self.agent_id,
                        name=name,
                        version=1,
                        is_active=True,
                        created_at=now,
                        **values,
                    )
                )
                return skill_id
            if row.source_type == "standard":
                raise ConflictError(f"{name!r} is a standard skill; learn under another name")
            c.execute(
                skills_table.update()
                .where(t.id == row.id)
                .values(version=row.version + 1, **values)
            )
            return str(row.id)

        if conn is not None:
            skill_id = write(conn)
            row = conn.execute(sa.select(skills_table).where(t.id == skill_id)).one()
            return _skill(row)
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
    ) -> Skill:
        """Edit an acquired skill (standard skills change through their files)."""
        skill = self.get(name_or_id)
        if skill.source == "standard":
            raise ConflictError(f"{skill.name!r} is a standard skill; edit its file instead")
        values: dict[str, Any] = {"updated_at": datetime.now(UTC), "version": skill.version + 1}
        if description is not None:
            values["description"] = description
        if guidance is not None:
            values["guidance"] = guidance
        if situation_pattern is not None:
            values["situation_pattern"] = situation_pattern
        if actions is not None:
            values["actions_json"] = list(dict.fromkeys(actions))
        with self.db.write() as conn:
            conn.execute(skills_table.update().where(skills_table.c.id == skill.id).values(values))
        return self.get(skill.id)

    def delete(self, name_or_id: str) -> None:
        """Forget an acquired skill; a standard skill can only be switched off."""
        skill = self.get(name_or_id)
        if skill.source == "standard":
            raise ConflictError(f"{skill.name!r} is a standard skill; switch it off instead")
        with self.db.write() as conn:
            conn.execute(skills_table.delete().where(skills_table.c.id == skill.id))

    def toggle(self, name_or_id: str, active: bool | None = None) -> Skill:
        """Switch a skill on or off (flip it when `active` is None)."""
        skill = self.get(name_or_id)
        value = (not skill.is_active) if active is None else active
        with self.db.write() as conn:
            conn.execute(
                skills_table.update()
                .where(skills_table.c.id == skill.id)
                .values(is_active=value, updated_at=datetime.now(UTC))
            )
        return self.get(skill.id)

    def increment_usage(self, name_or_id: str) -> None:
        skill = self.get(name_or_id)
        with self.db.write() as conn:
            conn.execute(
                skills_table.update()
                .where(skills_table.c.id == skill.id)
                .values(
                    usage_count=skills_table.c.usage_count + 1,
                    last_used_at=datetime.now(UTC),
                )
            )

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
        t = skills_table.c

        def run(c: Connection) -> int:
            if active is not None:
                ids = [s.id for s in active if action_name in s.actions]
            else:
                rows = c.execute(
                    sa.select(t.id, t.actions_json).where(
                        t.agent_id == self.agent_id, t.is_active.is_(True)
                    )
                ).all()
                ids = [r.id for r in rows if action_name in (r.actions_json or [])]
            now = datetime.now(UTC)
            for skill_id in ids:
                _COUNT_USE.execute(c, id=skill_id, now=now)
            return len(ids)

        if conn is not None:
            return run(conn)
        with self.db.write() as own:
            return run(own)

    def record_turn(self, facts: TurnFacts) -> dict[str, float]:
        """Fold a finished turn's outcome into the effectiveness of the skills it used."""
        from opencrab.core.effectiveness import record_turn

        return record_turn(self.db, self.agent_id, facts)

    def set_effectiveness(self, name_or_id: str, value: float) -> Skill:
        if not 0.0 <= value <= 1.0:
            raise ValidationError("effectiveness must be between 0 and 1")
        skill = self.get(name_or_id)
        with self.db.write() as conn:
            conn.execute(
                skills_table.update()
                .where(skills_table.c.id == skill.id)
                .values(effectiveness=value, updated_at=datetime.now(UTC))
            )
        return self.get(skill.id)


_SKILLS_STAMP = Prepared(
    sa.select(sa.func.count(), sa.func.max(skills_table.c.updated_at)).where(
        skills_table.c.agent_id == sa.bindparam("agent_id")
    )
)
_COUNT_USE = Prepared(
    skills_table.update()
    .where(skills_table.c.id == sa.bindparam("id"))
    .values(usage_count=skills_table.c.usage_count + 1, last_used_at=sa.bindparam("now"))
)


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
            if doc is not None and standard and _stale(skill.version, skill.file_path, doc):
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
        "version": doc.version,
        "actions": list(doc.actions),
        "file_path": doc.file_path,
    }


def _stale(version: int, file_path: str | None, doc: SkillDoc) -> bool:
    """Whether a stored standard skill is refreshed from `doc`: newer, or another language."""
    return version < doc.version or _language_of(file_path) != _language_of(doc.file_path)


def _language_of(file_path: str | None) -> str | None:
    """The language folder a skill file is in (`…/ja/x.skill.md` → "ja"), else None."""
    if not file_path:
        return None
    folder = Path(file_path).parent.name
    return folder if folder in LANGUAGES else None


def _skill(row: Any) -> Skill:
    return Skill(
        id=row.id,
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
        is_active=bool(row.is_active),
        last_used_at=row.last_used_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
