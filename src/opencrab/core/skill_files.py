"""Skill files (seed 001 `skills/*.skill.md`): the format, its parser, the loader.

A skill file is YAML frontmatter between two `---` lines, then a Markdown body, the
skill's guidance:

    ---
    name: workspace-management
    description: "Keep notes and files in your workspace"
    version: 2
    situation_pattern: "when something is worth keeping"   # optional
    actions:
      - ws_write
    ---
    # Workspace manual …

`parse_skill_text` refuses a malformed file with a SkillFileError naming the file, the
1-based line and the reason: the line of the offending key or action, or where a quote
or bracket that is never closed opens. Skill text sent over REST has no file name;
its errors read "line 3: …". `skill_markdown` writes a skill back in this format.
`load_skill_dirs` reads folders of them (core/skills.py says which folders).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from opencrab.errors import SkillFileError
from opencrab.prompts import LANGUAGES, Language

log = logging.getLogger(__name__)

SUFFIX = ".skill.md"
MAX_SKILL_FILE_BYTES = 256 * 1024
SYMLINKED = "is a symlink; skill files reached through a symlink are not loaded"
_NAME = re.compile(r"^[\w][\w .+\-()]{0,99}$", re.UNICODE)
ACTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class SkillDoc:
    """A parsed skill file; `lines` gives the line of each frontmatter key and action."""

    name: str
    description: str
    version: int
    actions: tuple[str, ...]
    guidance: str
    file_path: str
    situation_pattern: str = ""
    lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def line_of(self, key: str) -> int | None:
        """The 1-based line of a frontmatter key, or of an action (`action:<name>`)."""
        return self.lines.get(key)


@dataclass(frozen=True)
class SkillProblem:
    """A skill file that was skipped, and why."""

    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        return str(SkillFileError(self.file, self.line, self.reason))


FRONTMATTER_KEYS = ("name", "description", "version", "situation_pattern", "actions")
_TEXT_TAG = "tag:yaml.org,2002:str"


def parse_skill_text(text: str, file: str = "<text>", *, strict_name: bool = True) -> SkillDoc:
    """Parse one skill file's text; SkillFileError names the file, line and reason.

    `strict_name=False` takes any name of up to 100 characters (a learned skill's name,
    which need not be a file name).
    """
    if "\x00" in text:
        raise SkillFileError(file, None, "contains a NUL byte; not a text file")
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFileError(file, 1, "must start with a '---' line opening the YAML frontmatter")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillFileError(file, len(lines), "the frontmatter is never closed by '---'") from None
    meta, where = _frontmatter("\n".join(lines[1:end]), file)

    def line_of(key: str) -> int:
        return where.get(key, 2)

    name = meta.get("name")
    valid = isinstance(name, str) and (
        _NAME.match(name.strip()) if strict_name else 0 < len(name.strip()) <= 100
    )
    if not valid or not isinstance(name, str):
        rule = "letters, digits, ' .+-_()'" if strict_name else "characters"
        raise SkillFileError(file, line_of("name"), f"name must be text of 1 to 100 {rule}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFileError(file, line_of("description"), "description must be non-empty text")
    version = meta.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SkillFileError(file, line_of("version"), "version must be a whole number ≥ 1")
    situation = meta.get("situation_pattern")
    if situation is not None and not isinstance(situation, str):
        raise SkillFileError(file, line_of("situation_pattern"), "situation_pattern must be text")
    actions = meta.get("actions")
    if actions is None:
        actions = []
    if not isinstance(actions, list):
        raise SkillFileError(
            file, line_of("actions"), "actions must be a list of action names (snake_case)"
        )
    for index, action in enumerate(actions):
        if not isinstance(action, str) or not ACTION_NAME.match(action):
            raise SkillFileError(
                file,
                where.get(f"actions.{index}", line_of("actions")),
                f"actions must be a list of action names (snake_case); {action!r} is not one",
            )
    guidance = "\n".join(lines[end + 1 :]).strip()
    if not guidance:
        raise SkillFileError(file, end + 2, "the body (the skill's guidance) is empty")
    for index, action in enumerate(actions):
        where.setdefault(f"action:{action}", where.get(f"actions.{index}", line_of("actions")))
    return SkillDoc(
        name=name.strip(),
        description=description.strip(),
        version=version,
        actions=tuple(dict.fromkeys(actions)),
        guidance=guidance,
        file_path=file,
        situation_pattern=(situation or "").strip(),
        lines=where,
    )


def _frontmatter(text: str, file: str) -> tuple[dict[Any, Any], dict[str, int]]:
    """The frontmatter's mapping and the file line of each key (and each `actions.<i>`)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        meta = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise SkillFileError(file, *_yaml_problem(exc)) from None
    finally:
        loader.dispose()
    if not isinstance(meta, dict) or not isinstance(node, yaml.MappingNode):
        raise SkillFileError(file, 2, "the frontmatter must be a mapping of keys to values")
    where: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        line = key_node.start_mark.line + 2  # the frontmatter starts on the file's line 2
        if key_node.tag != _TEXT_TAG or key not in FRONTMATTER_KEYS:
            raise SkillFileError(file, line, f"unknown frontmatter key {key!r}")
        if key in where:
            raise SkillFileError(file, line, f"{key!r} is given twice (first on line {where[key]})")
        where[key] = line
        if key == "actions" and isinstance(value_node, yaml.SequenceNode):
            for index, item in enumerate(value_node.value):
                where[f"actions.{index}"] = item.start_mark.line + 2
    return meta, where


def _yaml_problem(exc: yaml.YAMLError) -> tuple[int | None, str]:
    """The file line and reason of a YAML error in the frontmatter.

    Something opened and never closed (a quote, a `[` or `{`) is reported where it opens,
    not where the parser ran out of text.
    """
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None) or ""
    mark = getattr(exc, "problem_mark", None)
    opened = getattr(exc, "context_mark", None)
    line = mark.line + 2 if mark is not None else None
    if opened is not None and ("quoted scalar" in context or "flow " in context):
        found = f" (line {line})" if line is not None else ""
        what = "a quoted value" if "quoted" in context else "a [ ] or { } collection"
        reason = f"{what} opened on this line is never closed: {problem}{found}"
        return opened.line + 2, f"invalid YAML in the frontmatter: {reason}"
    return line, f"invalid YAML in the frontmatter: {problem}"


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


SKILL_TEXT: set[str] = {
    "name",
    "description",
    "version",
    "actions",
    "guidance",
    "situation_pattern",
}
"""A skill's fields its file holds: `skill_markdown(**skill.model_dump(include=SKILL_TEXT))`."""


def skill_markdown(
    *,
    name: str,
    description: str,
    version: int,
    actions: Sequence[str],
    guidance: str,
    situation_pattern: str = "",
) -> str:
    """A skill in the skill-file format (what `parse_skill_text` reads back unchanged)."""

    def text(value: str) -> str:  # a JSON string is a YAML double-quoted scalar
        return json.dumps(value, ensure_ascii=False)

    front = [f"name: {text(name)}", f"description: {text(description)}", f"version: {version}"]
    if situation_pattern:
        front.append(f"situation_pattern: {text(situation_pattern)}")
    front.append("actions:" + "".join(f"\n  - {a}" for a in actions) if actions else "actions: []")
    return "---\n" + "\n".join(front) + "\n---\n\n" + guidance.strip() + "\n"
