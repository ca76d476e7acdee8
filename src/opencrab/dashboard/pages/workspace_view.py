"""What the workspace browser shows of a file: its kind, its preview, and its addresses.

A file is previewed by its name and, when small enough to read (PREVIEW_BYTES), its
bytes: images are shown from the public REST route; Markdown is rendered safely
(dashboard/markdown.py) or shown as highlighted source; code and skill files are
highlighted in the browser (highlight.js, the language named here); other UTF-8 text
is shown plain; anything else is binary and offered for download only. Text files are
editable. Every address is built here, each path segment URL-encoded, so names with
spaces, `#`, `?`, `%` or Japanese survive the round trip.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, unquote, urlencode, urlsplit

from markupsafe import Markup

from opencrab.core.skill_files import SUFFIX as SKILL_SUFFIX
from opencrab.core.skill_files import parse_skill_text
from opencrab.core.workspace import FileEntry
from opencrab.dashboard.markdown import render_markdown
from opencrab.errors import SkillFileError

PREVIEW_BYTES = 1024 * 1024  # larger files are offered for download, not read into the page
HEADING_OFFSET = 2  # a document's "#" sits under the page's h1 (agent) and h2 (file)

Kind = Literal["image", "markdown", "code", "text", "binary", "large"]
View = Literal["rendered", "source"]

IMAGES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".avif", ".bmp", ".ico"})
MARKDOWN = frozenset({".md", ".markdown"})
LANGUAGES = {
    ".py": "python", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "ini",
    ".ini": "ini", ".cfg": "ini", ".sh": "bash", ".bash": "bash", ".zsh": "bash",
    ".js": "javascript", ".mjs": "javascript", ".ts": "typescript", ".html": "xml",
    ".xml": "xml", ".css": "css", ".scss": "scss", ".sql": "sql", ".rs": "rust", ".go": "go",
    ".rb": "ruby", ".c": "c", ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".java": "java",
    ".kt": "kotlin", ".lua": "lua", ".php": "php", ".pl": "perl", ".r": "r",
    ".swift": "swift", ".diff": "diff", ".patch": "diff", ".graphql": "graphql",
    ".md": "markdown", ".markdown": "markdown",
}  # fmt: skip
NAMED = {"makefile": "makefile", "dockerfile": "bash"}
"""highlight.js languages (all in the vendored common bundle) by extension, or by name."""


def human_size(size: int) -> str:
    """1536 -> "1.5 KB" (binary multiples, as the quota is counted)."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def encode_path(path: str) -> str:
    """Each segment of a workspace path URL-encoded, joined by "/"."""
    return "/".join(quote(part, safe="") for part in path.split("/"))


def api_url(agent_id: str, path: str) -> str:
    """The public REST address of a file (GET reads it, PUT writes it, DELETE removes it)."""
    return f"/api/agents/{agent_id}/workspace/{encode_path(path)}"


def page_url(agent_name: str, path: str = "", **params: str | int | bool) -> str:
    """The workspace browser's address for `path` (a folder or a file)."""
    query: dict[str, str | int] = {"path": path} if path else {}
    query.update({k: "true" if v is True else v for k, v in params.items() if v is not False})
    base = f"/agents/{quote(agent_name, safe='')}/workspace"
    return base + ("?" + urlencode(query, quote_via=quote, safe="/") if query else "")


def extension(name: str) -> str:
    return posixpath.splitext(name)[1].lower()


def is_skill_file(path: str) -> bool:
    """A skill file by its place: `*.skill.md`, or Markdown in a `skills/` folder."""
    parts = path.split("/")
    return path.endswith(SKILL_SUFFIX) or (extension(path) in MARKDOWN and "skills" in parts[:-1])


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """("---\\n…\\n---\\n", the rest) when `text` opens with YAML frontmatter, else (None, text)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "".join(lines[: index + 1]), "".join(lines[index + 1 :])
    return None, text


@dataclass(frozen=True)
class Source:
    """One highlighted stretch of a file's text ("" language: plain)."""

    language: str
    text: str


@dataclass
class Preview:
    """What the page shows of one file."""

    kind: Kind
    language: str = ""
    text: str | None = None  # the file's text, when it is text
    sources: list[Source] = field(default_factory=list)  # the text, in highlighted stretches
    rendered: Markup | None = None  # Markdown as safe HTML
    frontmatter: str | None = None  # shown above rendered Markdown
    lines: int = 0
    skill: bool = False
    skill_problem: str | None = None  # why a skill file would not load
    view: View = "source"

    @property
    def editable(self) -> bool:
        return self.text is not None

    @property
    def gutter(self) -> str:
        """The line numbers beside the text, one per line."""
        return "\n".join(str(n) for n in range(1, self.lines + 1))


def kind_by_name(path: str) -> tuple[Kind, str]:
    """(kind, highlight.js language) guessed from a file's name alone."""
    ext = extension(path)
    if ext in IMAGES:
        return "image", ""
    if ext in MARKDOWN:
        return "markdown", "markdown"
    language = LANGUAGES.get(ext) or NAMED.get(posixpath.basename(path).lower(), "")
    return ("code" if language else "text"), language


def build_preview(
    entry: FileEntry, data: bytes | None, view: View | None, link: MarkdownLinks
) -> Preview:
    """The preview of `entry`; `data` is its bytes, None when it was too large to read."""
    kind, language = kind_by_name(entry.path)
    if kind == "image":
        return Preview("image")
    if data is None:
        return Preview("large")
    if b"\x00" in data:
        return Preview("binary")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Preview("binary")
    front, body = split_frontmatter(text) if kind == "markdown" else (None, text)
    skill = is_skill_file(entry.path) or front is not None
    preview = Preview(kind, language, text, lines=_line_count(text), skill=skill)
    if front is not None:
        preview.sources = [Source("yaml", front), Source("markdown", body)]
    else:
        preview.sources = [Source(language, text)]
    if kind == "markdown":
        preview.view = view or ("source" if skill else "rendered")
        preview.frontmatter = front
        preview.rendered = render_markdown(
            body, resolve=link.resolve, heading_offset=HEADING_OFFSET
        )
    if is_skill_file(entry.path):
        try:
            parse_skill_text(text, entry.name)
        except SkillFileError as exc:
            preview.skill_problem = str(exc)
    return preview


def _line_count(text: str) -> int:
    if not text:
        return 1
    return text.count("\n") + (0 if text.endswith("\n") else 1)


@dataclass(frozen=True)
class MarkdownLinks:
    """Where a Markdown file's relative links and images lead: other workspace files."""

    agent_id: str
    agent_name: str
    folder: str  # the Markdown file's folder

    def resolve(self, url: str, is_image: bool) -> str | None:
        """A relative link: the page of the file it names; an image: the file's bytes."""
        parts = urlsplit(url)
        target = unquote(parts.path)
        if not target:
            return None
        if target.startswith("/"):  # from the workspace's top folder
            path = posixpath.normpath(target.lstrip("/"))
        else:
            path = posixpath.normpath(posixpath.join(self.folder, target))
        if path in (".", "..") or path.startswith("../"):
            return None  # outside the workspace: nothing to point at
        if is_image:
            return api_url(self.agent_id, path)
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        return page_url(self.agent_name, path) + fragment
