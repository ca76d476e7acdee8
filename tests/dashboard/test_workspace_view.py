"""What the workspace browser makes of a file: its kind, its preview, its addresses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from opencrab.core.workspace import FileEntry
from opencrab.dashboard.pages.workspace_view import (
    PREVIEW_BYTES,
    MarkdownLinks,
    api_url,
    build_preview,
    human_size,
    page_url,
    split_frontmatter,
)

LINKS = MarkdownLinks("a1", "ハナコ", "ノート")


def entry(path: str, size: int = 10) -> FileEntry:
    return FileEntry(path.rsplit("/", 1)[-1], path, False, size, datetime.now(UTC))


def test_every_segment_is_encoded_so_hostile_names_round_trip() -> None:
    name = "メモ #1 ?50% 下書き.txt"
    assert api_url("a1", f"下書き/{name}") == (
        "/api/agents/a1/workspace/%E4%B8%8B%E6%9B%B8%E3%81%8D/"
        "%E3%83%A1%E3%83%A2%20%231%20%3F50%25%20%E4%B8%8B%E6%9B%B8%E3%81%8D.txt"
    )
    assert page_url("ハナコ", "a b/c#?.md", edit=True) == (
        "/agents/%E3%83%8F%E3%83%8A%E3%82%B3/workspace?path=a%20b/c%23%3F.md&edit=true"
    )
    assert page_url("ハナコ") == "/agents/%E3%83%8F%E3%83%8A%E3%82%B3/workspace"
    assert page_url("x", "a", view="source", edit=False) == "/agents/x/workspace?path=a&view=source"


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KB"),
        (600 * 1024, "600 KB"),
        (100 * 2**20, "100 MB"),
    ],
)
def test_sizes_read_as_people_write_them(size: int, shown: str) -> None:
    assert human_size(size) == shown


def test_markdown_links_stay_inside_the_workspace() -> None:
    assert (
        LINKS.resolve("%E5%9B%B3.png", True)
        == "/api/agents/a1/workspace/%E3%83%8E%E3%83%BC%E3%83%88/%E5%9B%B3.png"
    )
    assert (
        LINKS.resolve("../a.md#x", False)
        == "/agents/%E3%83%8F%E3%83%8A%E3%82%B3/workspace?path=a.md#x"
    )
    assert (
        LINKS.resolve("/top.md", False)
        == "/agents/%E3%83%8F%E3%83%8A%E3%82%B3/workspace?path=top.md"
    )
    assert LINKS.resolve("../../outside.png", True) is None
    assert LINKS.resolve("..", False) is None
    assert LINKS.resolve("?q=1", False) is None


def test_kinds_by_name_and_content() -> None:
    assert build_preview(entry("a/猫.PNG"), b"\x89PNG", None, LINKS).kind == "image"
    assert build_preview(entry("a/big.txt", PREVIEW_BYTES + 1), None, None, LINKS).kind == "large"
    assert build_preview(entry("a/nul.txt"), b"ab\x00cd", None, LINKS).kind == "binary"
    assert (
        build_preview(entry("a/latin1.txt"), "café".encode("latin-1"), None, LINKS).kind == "binary"
    )
    code = build_preview(entry("a/x.py"), b"print(1)\n", None, LINKS)
    assert (code.kind, code.language, code.lines, code.editable) == ("code", "python", 1, True)
    make = build_preview(entry("Makefile"), b"all:\n\techo\n", None, LINKS)
    assert (make.kind, make.language, make.lines) == ("code", "makefile", 2)
    text = build_preview(entry("メモ.txt"), "一\n二\n三".encode(), None, LINKS)
    assert (text.kind, text.language, text.lines, text.gutter) == ("text", "", 3, "1\n2\n3")
    assert build_preview(entry("空.txt"), b"", None, LINKS).lines == 1


def test_markdown_is_rendered_unless_it_is_a_skill_file() -> None:
    plain = build_preview(entry("ノート/a.md"), "# 題\n本文".encode(), None, LINKS)
    assert (plain.kind, plain.view, plain.skill) == ("markdown", "rendered", False)
    assert plain.rendered is not None
    assert "<h3>題</h3>" in plain.rendered
    source = build_preview(entry("ノート/a.md"), "# 題\n".encode(), "source", LINKS)
    assert source.view == "source"
    skill_text = "---\nname: 挨拶\ndescription: 丁寧に\n---\n# 使い方\n"
    skill = build_preview(entry("skills/挨拶.skill.md"), skill_text.encode(), None, LINKS)
    assert (skill.kind, skill.view, skill.skill, skill.skill_problem) == (
        "markdown",
        "source",
        True,
        None,
    )
    assert [(s.language, s.text) for s in skill.sources] == [
        ("yaml", "---\nname: 挨拶\ndescription: 丁寧に\n---\n"),
        ("markdown", "# 使い方\n"),
    ]
    assert skill.frontmatter is not None
    assert skill.rendered is not None
    assert "name: 挨拶" not in skill.rendered  # the frontmatter is shown apart


def test_a_broken_skill_file_says_where() -> None:
    broken = build_preview(entry("skills/壊.md"), b"---\nname: x\nversion: [\n---\n", None, LINKS)
    assert broken.skill_problem is not None
    assert broken.skill_problem.startswith("壊.md:3: invalid YAML")
    unclosed = build_preview(entry("skills/開.md"), b"---\nname: x\n", None, LINKS)
    assert unclosed.skill_problem == "開.md:2: the frontmatter is never closed by '---'"
    assert build_preview(entry("notes/x.md"), b"no frontmatter", None, LINKS).skill_problem is None


def test_frontmatter_is_split_only_when_closed() -> None:
    assert split_frontmatter("---\na: 1\n---\nbody") == ("---\na: 1\n---\n", "body")
    assert split_frontmatter("---\na: 1\n") == (None, "---\na: 1\n")
    assert split_frontmatter("text\n---\n") == (None, "text\n---\n")
