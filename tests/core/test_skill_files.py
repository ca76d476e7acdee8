"""Skill files: every error names the line it is at, and a skill written back reads the same.

(The format's other cases, and the loading of folders, are in test_skills.py.)
"""

from __future__ import annotations

import pytest

from opencrab.core.skill_files import parse_skill_text, skill_markdown
from opencrab.errors import SkillFileError

GOOD = "---\nname: x\ndescription: d\nversion: 2\nactions:\n  - ws_read\n  - ws_write\n---\nbody\n"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        # an unclosed quote or bracket is reported where it opens, not where the text ends
        (
            '---\nname: x\ndescription: "never closed\nversion: 1\n---\nbody',
            3,
            "a quoted value opened on this line is never closed",
        ),
        (
            "---\nname: x\ndescription: d\nactions: [ws_read, ws_write\nversion: 1\n---\nbody",
            4,
            "a [ ] or { } collection opened on this line is never closed",
        ),
        # a bad action is reported at its own item, not at `actions:`
        (
            "---\nname: x\ndescription: d\nactions:\n  - ws_read\n  - Not-An-Action\n---\nbody",
            6,
            "'Not-An-Action' is not one",
        ),
        # a key given twice is an error (YAML would silently keep the last one)
        (
            "---\nname: x\ndescription: d\nname: y\n---\nbody",
            4,
            "'name' is given twice (first on line 2)",
        ),
        # an indented mapping: keys are found where they are, not assumed at line 2
        ("---\n  name: x\n  description: d\n  version: 0\n---\nbody", 4, "version must be"),
        ("---\n  name: x\n  description: d\n  colour: red\n---\nbody", 4, "unknown frontmatter"),
        # a situation that is not text
        ("---\nname: x\ndescription: d\nsituation_pattern: [a]\n---\nbody", 4, "must be text"),
    ],
)
def test_errors_are_at_their_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill_text(text, "s.skill.md")
    assert (caught.value.line, caught.value.file) == (line, "s.skill.md")
    assert reason in caught.value.reason


def test_text_without_a_file_name_says_line() -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill_text("---\nname: x\ndescription: d\nfoo: 1\n---\nbody", "")
    assert str(caught.value) == "line 4: unknown frontmatter key 'foo'"
    with pytest.raises(SkillFileError) as nul:
        parse_skill_text("---\x00", "")
    assert str(nul.value) == "contains a NUL byte; not a text file"


def test_lines_of_keys_and_actions() -> None:
    doc = parse_skill_text(GOOD)
    assert [doc.line_of(k) for k in ("name", "description", "version", "actions")] == [2, 3, 4, 5]
    assert (doc.line_of("action:ws_read"), doc.line_of("action:ws_write")) == (6, 7)
    assert doc.line_of("situation_pattern") is None
    inline = parse_skill_text("---\nname: x\ndescription: d\nactions: [a_b, c_d]\n---\nbody")
    assert (inline.line_of("action:a_b"), inline.line_of("action:c_d")) == (4, 4)


def test_situation_pattern_is_part_of_the_format() -> None:
    doc = parse_skill_text("---\nname: x\ndescription: d\nsituation_pattern: '  長い議論 '\n---\nb")
    assert doc.situation_pattern == "長い議論"
    assert parse_skill_text(GOOD).situation_pattern == ""


def test_names_beyond_file_names_only_when_asked() -> None:
    text = "---\nname: 'why: a/b'\ndescription: d\n---\nbody"
    with pytest.raises(SkillFileError, match="name must be text") as caught:
        parse_skill_text(text)
    assert caught.value.line == 2
    assert parse_skill_text(text, strict_name=False).name == "why: a/b"
    with pytest.raises(SkillFileError, match="1 to 100 characters"):
        parse_skill_text(f"---\nname: {'x' * 101}\ndescription: d\n---\nb", strict_name=False)


@pytest.mark.parametrize(
    ("name", "description", "situation", "actions", "guidance"),
    [
        (
            "要約のコツ",
            "長いスレッドを要約する",
            "議論が長くなった時",
            ("ws_read",),
            "# 手順\n\n1. 決定",
        ),
        ("plain", 'quotes " and: colons # too', "", (), "line one\n\n---\n\nafter a rule"),
        ("x", "multi\nline", "tab\there", ("a", "b_c"), "body"),
    ],
)
def test_skill_markdown_reads_back_the_same(
    name: str, description: str, situation: str, actions: tuple[str, ...], guidance: str
) -> None:
    text = skill_markdown(
        name=name,
        description=description,
        version=7,
        actions=actions,
        guidance=guidance,
        situation_pattern=situation,
    )
    doc = parse_skill_text(text, strict_name=False)
    assert (doc.name, doc.description, doc.situation_pattern) == (name, description, situation)
    assert (doc.version, doc.actions, doc.guidance) == (7, actions, guidance)
