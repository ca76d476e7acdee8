"""What the workspace page reads: the selection, the tree, the folder's table, errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opencrab.core.workspace import Workspace
from opencrab.dashboard.pages.workspace import PAGE_SIZE, TREE_LIMIT, load_page


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws")
    workspace.write("メモ/今日 #1.txt", "予定\n")
    workspace.write("メモ/深い/奥.md", "# 奥\n")
    workspace.write("readme.txt", "top\n")
    return workspace


def load(ws: Workspace, path: str, *, edit: bool = False, page: int = 1):  # type: ignore[no-untyped-def]
    return load_page(ws, "a1", "ハナコ", path, view=None, edit=edit, page=page)


def names(nodes) -> list[str]:  # type: ignore[no-untyped-def]
    return [getattr(n, "entry", n).name for n in nodes]


def test_a_file_opens_the_folders_on_its_way(ws: Workspace) -> None:
    state = load(ws, "メモ/深い/奥.md")
    assert (state.kind, state.path, state.folder, state.status) == (
        "file",
        "メモ/深い/奥.md",
        "メモ/深い",
        200,
    )
    assert names(state.tree) == ["メモ", "readme.txt"]  # folders first
    memo = state.tree[0]
    assert names(memo.children) == ["深い", "今日 #1.txt"]
    deep = memo.children[0]
    assert names(deep.children) == ["奥.md"]
    assert deep.children[0].current
    assert state.tree[1].children is None
    assert state.preview is not None
    assert state.preview.kind == "markdown"
    assert (state.usage.bytes, state.usage.files) == (
        len("予定\n".encode()) + len("# 奥\n".encode()) + 4,
        3,
    )


def test_a_folder_lists_its_entries_and_the_root_is_a_folder(ws: Workspace) -> None:
    root = load(ws, "")
    assert (root.kind, root.folder) == ("folder", "")
    assert names(root.entries) == ["メモ", "readme.txt"]
    memo = load(ws, "./メモ/")  # the path is the jail's own reading of it
    assert (memo.kind, memo.path, memo.folder) == ("folder", "メモ", "メモ")
    assert names(memo.entries) == ["深い", "今日 #1.txt"]
    assert memo.tree[0].current
    assert memo.tree[0].children is not None


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("../x", 400, "contains '..'"),
        ("/etc", 400, "is absolute"),
        ("a\x00b", 400, "NUL byte"),
        ("readme.txt/x", 400, "is a file, not a folder"),
        ("ない.txt", 404, "no file or folder 'ない.txt' in your workspace"),
        ("ない/ない.txt", 404, "no file or folder 'ない/ない.txt'"),
    ],
)
def test_a_bad_or_missing_path_is_the_jails_error(
    ws: Workspace, path: str, status: int, message: str
) -> None:
    state = load(ws, path)
    assert (state.kind, state.status) == ("error", status)
    assert message in state.error
    assert names(state.tree) == ["メモ", "readme.txt"]  # the way back is still there


def test_a_symlink_is_refused_not_followed(ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(tmp_path, ws.root / "linkdir")
    state = load(ws, "link.txt")
    assert (state.kind, state.status) == ("error", 400)
    assert "symbolic link" in state.error
    inside = load(ws, "linkdir/secret.txt")
    assert inside.kind == "error"
    assert "symbolic link" in inside.error


def test_edit_opens_a_text_file_or_a_new_one(ws: Workspace) -> None:
    existing = load(ws, "readme.txt", edit=True)
    assert (existing.kind, existing.edit) == ("file", True)
    new = load(ws, "新しい/メモ.md", edit=True)
    assert (new.kind, new.folder, new.status) == ("new", "新しい", 200)
    ws.write("bin.dat", b"\x00\x01")
    binary = load(ws, "bin.dat", edit=True)
    assert (binary.kind, binary.edit) == ("file", False)  # nothing to edit as text
    assert load(ws, "../new.md", edit=True).status == 400


def test_a_big_folder_is_cut_in_the_tree_and_paged_in_the_table(ws: Workspace) -> None:
    count = TREE_LIMIT + PAGE_SIZE + 5
    for n in range(count):
        ws.write(f"多い/f{n:04d}.txt", "x")
    last = f"多い/f{count - 1:04d}.txt"
    state = load(ws, last)
    folder = next(node for node in state.tree if node.entry.name == "多い")
    assert len(folder.children) == TREE_LIMIT + 1  # the selection is shown though past the cut
    assert folder.children[-1].current
    assert folder.more == count - TREE_LIMIT - 1
    second = load(ws, "多い", page=2)
    assert (second.total, second.pages, second.page) == (count, 3, 2)
    assert second.entries[0].name == f"f{PAGE_SIZE:04d}.txt"
    beyond = load(ws, "多い", page=99)
    assert beyond.page == 3
    assert len(beyond.entries) == 5
