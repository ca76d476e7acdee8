"""The repository's documents stand on their own: nothing cites a file outside it.

The code, the tests and the README point at docs/architecture.md for the design; a
reader of a clone has no other design document, so a comment naming one is a dead end.
Every relative link of the README leads to a file of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ("DESIGN" + ".md", "STYLE" + ".md", "../" + "shared")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".html", ".js", ".css", ".txt", ""}


def _repository_texts() -> list[Path]:
    roots = [ROOT / "src", ROOT / "tests", ROOT / "bench", ROOT / "docs", ROOT / ".ci"]
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    for root in roots:
        files += [
            path
            for path in root.rglob("*")
            if path.is_file()
            and path.suffix in TEXT_SUFFIXES
            and "fixtures" not in path.parts
            and "vendor" not in path.parts
            and "__pycache__" not in path.parts
        ]
    return files


def test_no_file_cites_a_document_outside_the_repository() -> None:
    citing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _repository_texts()
        for name in OUTSIDE
        if name in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert citing == []


def test_no_file_cites_an_outside_document_by_its_section_number() -> None:
    """A rule cited by its number (the file's name in capitals, then a number or a
    section sign) points outside the repository as much as the file name does."""
    citing = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in _repository_texts()
        for match in re.finditer(
            r"\b(?:DESIGN|STYLE)\s*(?:§|\d)", path.read_text(encoding="utf-8", errors="replace")
        )
    ]
    assert citing == []


def test_the_readme_names_no_seed_document() -> None:
    """The seed documents the project was written from are not in the repository: the
    README says what a thing is ("the shipped config's example"), not "seed 001's"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = [
        f"README.md:{readme.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
        for match in re.finditer(r"\bseeds?[\s-]*0\d\d", readme, flags=re.IGNORECASE)
    ]
    assert named == []


def test_the_architecture_document_names_the_sections_code_points_at() -> None:
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (.+)$", architecture, flags=re.MULTILINE))
    cited = {
        match
        for path in _repository_texts()
        for match in re.findall(
            r'docs/architecture\.md, "([^"]+)"', path.read_text(encoding="utf-8", errors="replace")
        )
    }
    assert cited, "the code points at docs/architecture.md somewhere"
    assert cited <= sections, f"sections cited but missing: {sorted(cited - sections)}"


def test_every_relative_link_of_the_readme_leads_to_a_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [
        target
        for target in re.findall(r"\]\(([^)#\s]+)\)", readme)
        if "://" not in target and not target.startswith("mailto:")
    ]
    assert links, "the README links to its pictures and docs"
    missing = [target for target in links if not (ROOT / target).exists()]
    assert missing == []
