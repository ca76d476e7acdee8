"""Workspace: file operations, the jail (property-based over hostile paths) and the quota."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opencrab.config import Settings
from opencrab.core.workspace import Workspace
from opencrab.errors import NotFoundError, OpenCrabError, QuotaExceeded, WorkspaceError


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "outer" / "ws", max_size_bytes=1000)


def test_files_round_trip(ws: Workspace) -> None:
    assert ws.list() == []  # a new workspace lists empty before it exists
    assert ws.write("notes/東京.md", "晴れ\n") == len("晴れ\n".encode())
    ws.write("data/blob.bin", b"\x00\xff")
    assert ws.read("notes/東京.md") == "晴れ\n"
    assert ws.read_bytes("data/blob.bin") == b"\x00\xff"
    with pytest.raises(WorkspaceError, match="not UTF-8"):
        ws.read("data/blob.bin")
    ws.mkdir("drafts/empty")
    assert [(e.name, e.is_dir) for e in ws.list()] == [
        ("data", True),
        ("drafts", True),
        ("notes", True),
    ]
    assert [e.path for e in ws.list("notes")] == ["notes/東京.md"]
    assert ws.usage_bytes() == len("晴れ\n".encode()) + 2
    assert not [p for p in ws.root.rglob("*") if p.name.startswith(".tmp-")]


def test_edit_needs_a_unique_old_string(ws: Workspace) -> None:
    ws.write("a.md", "one two two")
    with pytest.raises(WorkspaceError, match="appears 2 times"):
        ws.edit("a.md", "two", "2")
    with pytest.raises(WorkspaceError, match="was not found"):
        ws.edit("a.md", "three", "3")
    with pytest.raises(WorkspaceError, match="empty"):
        ws.edit("a.md", "", "x")
    assert ws.read("a.md") == "one two two"  # nothing changed by the failed edits
    ws.edit("a.md", "one", "1")
    assert ws.read("a.md") == "1 two two"


def test_delete_and_mistakes(ws: Workspace) -> None:
    ws.write("d/f.txt", "x")
    ws.write("g.txt", "y")
    with pytest.raises(WorkspaceError, match="is a file"):
        ws.mkdir("g.txt")
    with pytest.raises(WorkspaceError, match="is a folder"):
        ws.read("d")
    with pytest.raises(NotFoundError):
        ws.read("missing.txt")
    with pytest.raises(WorkspaceError, match="empty"):
        ws.delete("")
    with pytest.raises(WorkspaceError):
        ws.delete(".")
    ws.delete("d")
    ws.delete("g.txt")
    assert ws.list() == []
    with pytest.raises(NotFoundError):
        ws.delete("g.txt")
    assert ws.root.is_dir()


def test_quota_refuses_and_keeps_the_old_file(ws: Workspace) -> None:
    ws.write("big.txt", "a" * 600)
    with pytest.raises(QuotaExceeded, match="quota of 1000 bytes"):
        ws.write("more.txt", "b" * 500)
    assert not ws.exists("more.txt")
    with pytest.raises(QuotaExceeded):
        ws.write("big.txt", "c" * 1001)
    assert ws.read("big.txt") == "a" * 600
    ws.write("big.txt", "d" * 1000)  # replacing counts the old size out
    assert ws.usage_bytes() == 1000


def test_symlinks_are_refused(ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    ws.mkdir("x")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(outside, ws.root / "x" / "door")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.read("link.txt")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("link.txt", "overwrite")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("x/door/planted.txt", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.list("x/door")
    assert secret.read_text() == "top secret"
    assert list(outside.iterdir()) == []


def test_for_agent_uses_the_configured_root_and_quota(settings: Settings) -> None:
    ws = Workspace.for_agent(settings, "abc")
    assert ws.root == (settings.data_dir / "agents" / "abc" / "workspace").absolute()
    assert ws.max_size_bytes == 100 * 1024 * 1024


PARTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "/",
        "\\",
        "C:",
        "c:\\",
        "\x00",
        "~",
        "a",
        "b.txt",
        "ü",
        "東京",
        "//",
        "\n",
        "x" * 300,
        "..\\..",
        "%2e%2e",
        "\u202e",
        " ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PARTS, min_size=1, max_size=6), st.sampled_from(["/", "\\", ""]))
def test_no_hostile_path_writes_outside_the_root(parts: list[str], joiner: str) -> None:
    path = joiner.join(parts)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "sibling").mkdir()
        ws = Workspace(base / "outer" / "ws")
        ws.root.mkdir(parents=True)
        before = {p for p in base.rglob("*") if not p.is_relative_to(ws.root)}
        try:
            ws.write(path, "pwned")
        except OpenCrabError:
            pass
        else:
            written = [p for p in ws.root.rglob("*") if p.is_file()]
            assert len(written) == 1
            assert written[0].resolve().is_relative_to(ws.root.resolve())
        after = {p for p in base.rglob("*") if not p.is_relative_to(ws.root)}
        assert after == before
        assert not (Path("/tmp") / "pwned").exists()
