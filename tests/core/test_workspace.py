"""Workspace: file round trips, edits, listing, deletion, the quota and the jail.

The jail is checked two ways: targeted cases (symlinks planted with os.symlink, every
lexical rule) and a property-based test that throws hostile paths at `write` and
compares the whole tree around the workspace before and after.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from opencrab.config import Settings, load_settings
from opencrab.core.workspace import MB, RECONCILE_SECS, Usage, Workspace
from opencrab.errors import (
    NotFoundError,
    OpenCrabError,
    QuotaExceeded,
    ValidationError,
    WorkspaceError,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "outer" / "ws", max_size_bytes=1000)


def tree(base: Path) -> dict[str, bytes | None]:
    """Every path below `base` with a file's bytes (None for folders and links)."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = path.relative_to(base).as_posix()
            found[key] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".tmp-")]


# ------------------------------------------------------------------ round trips
def test_new_workspace_is_empty_before_its_first_write(ws: Workspace) -> None:
    assert not ws.root.exists()
    assert ws.list() == []
    assert ws.list(".") == []
    assert ws.usage_bytes() == 0
    assert ws.exists("") is False


def test_text_round_trip_with_japanese(ws: Workspace) -> None:
    text = "# 今日のメモ\n東京は晴れ。明日は雨☔️\n"
    written = ws.write("ノート/今日.md", text)
    assert written == len(text.encode("utf-8"))
    assert written > len(text)  # counted in bytes, not characters
    assert ws.read("ノート/今日.md") == text
    assert ws.read_bytes("ノート/今日.md") == text.encode("utf-8")
    assert (ws.root / "ノート" / "今日.md").read_text(encoding="utf-8") == text
    assert ws.exists("ノート/今日.md")
    assert ws.exists("ノート")
    assert not ws.exists("ノート/明日.md")


def test_bytes_round_trip_and_binary_refused_as_text(ws: Workspace) -> None:
    blob = bytes(range(256))
    assert ws.write("data/blob.bin", blob) == 256
    assert ws.read_bytes("data/blob.bin") == blob
    with pytest.raises(WorkspaceError, match=r"'data/blob.bin' is not UTF-8 text \(256 bytes\)"):
        ws.read("data/blob.bin")
    assert ws.write("data/empty.bin", b"") == 0
    assert ws.read_bytes("data/empty.bin") == b""
    assert ws.read("data/empty.bin") == ""


def test_overwrite_replaces_content_entirely(ws: Workspace) -> None:
    ws.write("a.txt", "a much longer first version")
    ws.write("a.txt", "short")
    assert ws.read("a.txt") == "short"
    assert ws.usage_bytes() == 5


def test_dot_and_double_slash_components_are_normalised(ws: Workspace) -> None:
    ws.write("./notes//x.md", "x")
    assert ws.read("notes/x.md") == "x"
    assert ws.read("notes/./x.md") == "x"
    assert [e.path for e in ws.list("notes/")] == ["notes/x.md"]


def test_atomic_write_leaves_no_temp_files(ws: Workspace) -> None:
    for n in range(5):
        ws.write("deep/er/f.txt", f"version {n}")
        ws.write(f"top{n}.txt", "x" * n)
    assert temp_files(ws.root) == []
    assert ws.read("deep/er/f.txt") == "version 4"
    names = sorted(p.name for p in ws.root.rglob("*"))
    assert names == sorted(["deep", "er", "f.txt", *[f"top{n}.txt" for n in range(5)]])


def test_missing_file_and_folder_mistakes(ws: Workspace) -> None:
    ws.write("d/f.txt", "x")
    with pytest.raises(NotFoundError, match=r"no file 'missing\.txt'"):
        ws.read("missing.txt")
    with pytest.raises(WorkspaceError, match="'d' is a folder"):
        ws.read("d")
    with pytest.raises(WorkspaceError, match="'d' is a folder; choose a file name"):
        ws.write("d", "x")
    with pytest.raises(WorkspaceError, match=r"'d/f\.txt' is a file, not a folder"):
        ws.list("d/f.txt")
    with pytest.raises(NotFoundError, match="no folder 'nope'"):
        ws.list("nope")
    with pytest.raises(
        WorkspaceError, match=r"'d/f\.txt/inner\.txt'(: Not a directory| is a file)"
    ):
        ws.write("d/f.txt/inner.txt", "x")
    assert ws.read("d/f.txt") == "x"


def test_errors_are_validation_errors(ws: Workspace) -> None:
    """The error tree: WorkspaceError and QuotaExceeded are ValidationErrors."""
    with pytest.raises(ValidationError):
        ws.write("../x", "x")
    assert issubclass(QuotaExceeded, WorkspaceError)
    assert issubclass(WorkspaceError, OpenCrabError)


# ------------------------------------------------------------------ edit
def test_edit_replaces_a_unique_occurrence(ws: Workspace) -> None:
    ws.write("notes.md", "東京: 晴れ\n大阪: 雨\n")
    size = ws.edit("notes.md", "大阪: 雨", "大阪: 曇り")
    assert ws.read("notes.md") == "東京: 晴れ\n大阪: 曇り\n"
    assert size == len("東京: 晴れ\n大阪: 曇り\n".encode())
    ws.edit("notes.md", "東京: 晴れ\n", "")  # deleting text is an edit too
    assert ws.read("notes.md") == "大阪: 曇り\n"


def test_edit_refuses_missing_repeated_and_empty_old_string(ws: Workspace) -> None:
    ws.write("a.md", "one two two three")
    with pytest.raises(WorkspaceError, match=r"old_string was not found in 'a\.md'"):
        ws.edit("a.md", "four", "4")
    with pytest.raises(WorkspaceError, match=r"old_string appears 2 times in 'a\.md'") as caught:
        ws.edit("a.md", "two", "2")
    assert "unique" in str(caught.value)
    with pytest.raises(WorkspaceError, match="old_string is empty"):
        ws.edit("a.md", "", "x")
    with pytest.raises(NotFoundError):
        ws.edit("missing.md", "a", "b")
    assert ws.read("a.md") == "one two two three"
    assert temp_files(ws.root) == []


# ------------------------------------------------------------------ list
def test_list_puts_folders_first_then_names(ws: Workspace) -> None:
    ws.write("b.txt", "bb")
    ws.write("a.txt", "a")
    ws.mkdir("zeta")
    ws.write("alpha/inner.txt", "i")
    ws.write("C.txt", "c")
    entries = ws.list()
    assert [(e.name, e.is_dir) for e in entries] == [
        ("alpha", True),
        ("zeta", True),
        ("C.txt", False),
        ("a.txt", False),
        ("b.txt", False),
    ]
    sizes = {e.name: e.size for e in entries}
    assert sizes == {"alpha": 0, "zeta": 0, "C.txt": 1, "a.txt": 1, "b.txt": 2}
    assert [e.path for e in ws.list("alpha")] == ["alpha/inner.txt"]
    assert all(e.modified.tzinfo is not None for e in entries)


def test_usage_counts_every_file_below_the_root(ws: Workspace) -> None:
    ws.write("a.txt", "12345")
    ws.write("x/y/z.txt", "東京")  # 6 bytes
    ws.mkdir("empty")
    assert ws.usage_bytes() == 11
    assert sorted(e.path for e in ws.walk()) == ["a.txt", "x/y/z.txt"]


# ------------------------------------------------------------------ delete / mkdir
def test_delete_a_file_and_a_folder_with_contents(ws: Workspace) -> None:
    ws.write("keep.txt", "k")
    ws.write("old/a.txt", "a")
    ws.write("old/sub/b.txt", "b")
    ws.delete("old")
    assert not (ws.root / "old").exists()
    ws.delete("keep.txt")
    assert ws.list() == []
    assert ws.root.is_dir()
    with pytest.raises(NotFoundError, match=r"no file or folder 'keep\.txt'"):
        ws.delete("keep.txt")


@pytest.mark.parametrize("root_path", ["", ".", "/", "./", ".//."])
def test_deleting_the_root_is_refused(ws: Workspace, root_path: str) -> None:
    ws.write("precious.txt", "p")
    with pytest.raises(WorkspaceError):
        ws.delete(root_path)
    assert ws.read("precious.txt") == "p"


def test_mkdir_creates_parents_and_refuses_a_file(ws: Workspace) -> None:
    ws.mkdir("a/b/c")
    assert (ws.root / "a" / "b" / "c").is_dir()
    ws.mkdir("a/b/c")  # an existing folder is fine
    ws.write("file.txt", "f")
    with pytest.raises(WorkspaceError, match=r"'file\.txt' is a file, not a folder"):
        ws.mkdir("file.txt")
    with pytest.raises(WorkspaceError):
        ws.mkdir("file.txt/sub")
    assert ws.read("file.txt") == "f"
    with pytest.raises(WorkspaceError, match="empty"):
        ws.mkdir("")


# ------------------------------------------------------------------ quota
def test_quota_refuses_a_new_file_and_writes_nothing(ws: Workspace) -> None:
    ws.write("big.txt", "a" * 600)
    before = tree(ws.root)
    with pytest.raises(QuotaExceeded) as caught:
        ws.write("new/folder/more.txt", "b" * 401)
    message = str(caught.value)
    assert "1001 bytes" in message
    assert "quota of 1000 bytes" in message
    assert tree(ws.root) == before  # not even the parent folders were created
    assert temp_files(ws.root) == []
    ws.write("fits.txt", "c" * 400)  # exactly at the quota is allowed
    assert ws.usage_bytes() == 1000


def test_quota_keeps_the_existing_file_when_an_overwrite_would_exceed(ws: Workspace) -> None:
    ws.write("keep.txt", "k" * 300)
    ws.write("big.txt", "a" * 600)
    with pytest.raises(QuotaExceeded):
        ws.write("big.txt", "z" * 701)  # 300 + 701 > 1000
    assert ws.read("big.txt") == "a" * 600
    assert temp_files(ws.root) == []
    ws.write("big.txt", "y" * 700)  # the old 600 bytes are counted out
    assert ws.usage_bytes() == 1000


def test_quota_applies_to_edits(ws: Workspace) -> None:
    ws.write("a.txt", "x" * 990 + "END")
    with pytest.raises(QuotaExceeded):
        ws.edit("a.txt", "END", "THE VERY END")
    assert ws.read("a.txt").endswith("END")
    assert len(ws.read("a.txt")) == 993


def test_for_agent_uses_configured_path_and_quota(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace.for_agent(settings, "agent-42")
    assert ws.root == (Path(settings.data_dir) / "agents" / "agent-42" / "workspace").absolute()
    assert ws.max_size_bytes == 100 * MB
    small = load_settings(overrides={"agent": {"max_workspace_size_mb": 1}})
    tiny = Workspace.for_agent(small, "agent-42")
    assert tiny.max_size_bytes == MB
    tiny.write("a.bin", b"\0" * (MB - 1))
    with pytest.raises(QuotaExceeded):
        tiny.write("b.bin", b"\0\0")


# ------------------------------------------------------------------ usage, a running figure
def count_scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders os.scandir is asked for from now on (a walk scans every folder)."""
    scanned: list[str] = []
    real = os.scandir

    def counting(path: Any = ".") -> Any:
        scanned.append(os.fsdecode(path) if not isinstance(path, int) else f"fd {path}")
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    return scanned


def test_writes_keep_usage_as_a_running_figure_without_walking_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "many"
    for folder in range(40):
        (root / f"d{folder}").mkdir(parents=True)
        for index in range(50):
            (root / f"d{folder}" / f"{index}.txt").write_bytes(b"x" * 10)
    ws = Workspace(root, max_size_bytes=1_000_000)
    ws.usage_tracker.clock = lambda: 0.0  # the refusal below comes right after the count
    scans = count_scans(monkeypatch)

    assert ws.usage() == Usage(bytes=20_000, files=2_000)
    assert len(scans) == 41  # reconciled once: the root and its 40 folders
    scans.clear()
    for index in range(20):
        ws.write(f"new/{index}.txt", "y" * 5)  # +100 bytes, +20 files
    ws.write("d0/0.txt", "z" * 30)  # 10 → 30 bytes
    ws.edit("d0/1.txt", "x" * 10, "e")  # 10 → 1 byte
    ws.delete("d1/0.txt")  # −10 bytes, −1 file
    with pytest.raises(QuotaExceeded):
        ws.write("huge.bin", b"\0" * 1_000_000)
    assert ws.usage() == Usage(bytes=20_101, files=2_019)
    # every Workspace opened on the same root (each turn, each request) shares the figure
    assert Workspace(root, max_size_bytes=1_000_000).usage_bytes() == 20_101
    assert scans == []  # not one folder was scanned for the quota

    ws.delete("d2")  # a folder: what it held is counted out
    assert ws.usage() == Usage(bytes=19_601, files=1_969)
    assert ws.reconcile_usage() == Usage(bytes=19_601, files=1_969)  # a fresh walk agrees


def test_a_failed_write_leaves_the_figure_as_it_was(ws: Workspace) -> None:
    ws.write("a.txt", "a" * 100)
    with pytest.raises(WorkspaceError):
        ws.write("a.txt/inside.txt", "x")  # a parent is a file
    with pytest.raises(QuotaExceeded):
        ws.write("b.txt", "b" * 901)
    assert ws.usage() == Usage(bytes=100, files=1)
    assert ws.reconcile_usage() == Usage(bytes=100, files=1)


def test_space_freed_by_hand_is_found_before_a_write_is_refused(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    ws.usage_tracker.clock = lambda: now[0]
    ws.write("a.txt", "a" * 900)
    (ws.root / "a.txt").unlink()  # removed outside the workspace API
    assert ws.usage() == Usage(bytes=900, files=1)  # the figure does not know yet
    scans = count_scans(monkeypatch)
    for _ in range(10):  # a hostile loop of refused writes does not walk each time
        with pytest.raises(QuotaExceeded):
            ws.write("b.txt", "b" * 500)
    assert scans == []
    now[0] += RECONCILE_SECS  # a while later, a refusal is checked against a fresh count
    ws.write("b.txt", "b" * 500)
    assert len(scans) == 1  # the root (its one folder), scanned by its descriptor
    assert ws.usage() == Usage(bytes=500, files=1)


# ------------------------------------------------------------------ the jail: symlinks
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outer" / "elsewhere"
    folder.mkdir(parents=True)
    (folder / "secret.txt").write_text("top secret")
    return folder


def test_symlinked_file_pointing_outside_is_refused(ws: Workspace, outside: Path) -> None:
    ws.root.mkdir(parents=True)
    os.symlink(outside / "secret.txt", ws.root / "link.txt")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.read("link.txt")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.read_bytes("link.txt")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("link.txt", "overwritten")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.edit("link.txt", "top", "no")
    assert (outside / "secret.txt").read_text() == "top secret"
    ws.delete("link.txt")  # removes the planted link itself, never its target
    assert not (ws.root / "link.txt").is_symlink()
    assert (outside / "secret.txt").read_text() == "top secret"


def test_symlinked_folder_pointing_outside_is_refused(ws: Workspace, outside: Path) -> None:
    ws.mkdir("x")
    os.symlink(outside, ws.root / "x" / "door")
    before = tree(outside)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.list("x/door")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.read("x/door/secret.txt")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("x/door/planted.txt", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("x/door/new/deeper.txt", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.mkdir("x/door/sub")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.delete("x/door/secret.txt")
    assert tree(outside) == before
    # the link is listed where it lives, but never followed; the quota ignores it
    assert [(e.name, e.is_dir) for e in ws.list("x")] == [("door", False)]
    assert ws.usage_bytes() == 0
    ws.delete("x/door")  # unlinks the folder link, the folder outside stays whole
    assert tree(outside) == before
    assert ws.list("x") == []


def test_symlink_to_a_folder_inside_is_refused_too(ws: Workspace) -> None:
    ws.write("real/a.txt", "a")
    os.symlink(ws.root / "real", ws.root / "alias")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.read("alias/a.txt")


# ------------------------------------------------------------------ the jail: lexical rules
@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../escape.txt", "contains '..'"),
        ("a/../../escape.txt", "contains '..'"),
        ("a/..", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("//server/share/x", "is absolute"),
        ("C:/Windows/x", "names a drive"),
        ("c:x", "names a drive"),
        ("./C:/C:", "names a drive"),  # found by hypothesis: "./" hid the drive
        ("a\\b.txt", "backslash"),
        ("..\\..\\x", "backslash"),
        ("a\x00b", "NUL byte"),
        ("a\nb", "control character"),
        ("a\x7fb", "control character"),
        ("x" * 256, "longer than 255 bytes"),
        ("あ" * 86, "longer than 255 bytes"),  # 258 bytes in 86 characters
        ("a/" * 600, "longer than 1024 characters"),
        ("", "empty"),
        ("./.", "empty"),
    ],
)
def test_hostile_paths_are_refused_with_the_rule(ws: Workspace, path: str, reason: str) -> None:
    with pytest.raises(WorkspaceError) as caught:
        ws.write(path, "x")
    assert reason in str(caught.value)
    assert not ws.root.parent.exists()  # not even the workspace folder was created


def test_path_must_be_a_string(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="must be a string, not bytes"):
        ws.write(b"a.txt", "x")  # type: ignore[arg-type]


def test_lone_surrogates_are_refused_not_crashing(ws: Workspace) -> None:
    """A model's JSON may carry "\\ud800"; it is not a valid file name on any system."""
    for path in ("\ud800", "a/\udcff", "\udc2e\udc2e/x"):
        with pytest.raises(WorkspaceError, match="not valid Unicode"):
            ws.write(path, "x")
    assert not ws.root.parent.exists()


def test_unusual_but_harmless_names_stay_inside(ws: Workspace) -> None:
    for name in ("~", "...", " ", "%2e%2e", "a:b", "\u202etxt.exe", "ü", "C"):
        ws.write(f"odd/{name}", name)
        assert ws.read(f"odd/{name}") == name
        assert (ws.root / "odd" / name).is_file()
    assert len(ws.list("odd")) == 8


# ------------------------------------------------------------------ property: no escape
COMPONENTS = st.one_of(
    st.sampled_from(
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
            "~root",
            "//",
            "a/../..",
            "..\\..",
            "%2e%2e",
            "\x1b",
            "\u202e",
            "\ud800",
            "\udcff",
            " ",
            "a",
            "b.txt",
            "東京",
            "Ω≈ç",
            "x" * 255,
            "x" * 300,
            "あ" * 90,
            "sentinel",
            "outer",
        ]
    ),
    st.text(max_size=6),
    st.text(alphabet="./\\:~a", max_size=8),
    st.sampled_from(["notes", "a", "東京.md", "x.txt"]),  # plain names, so some writes succeed
)
JOINERS = st.sampled_from(["/", "\\", "", "//", "/../"])


@hyp_settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(parts=st.lists(COMPONENTS, min_size=1, max_size=6), joiner=JOINERS)
def test_no_path_ever_writes_outside_the_root(
    tmp_path: Path, parts: list[str], joiner: str
) -> None:
    path = joiner.join(parts)
    # tmp_path is also the working directory (tests/conftest.py), so a path taken
    # relative to the process instead of the root would show up in the snapshot too
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        root = base / "outer" / "ws"
        root.mkdir(parents=True)
        sentinel = base / "outer" / "sentinel"
        sentinel.mkdir()
        (sentinel / "keep.txt").write_text("untouched")
        ws = Workspace(root, max_size_bytes=10_000)
        before = {
            k: v for k, v in tree(tmp_path).items() if not (tmp_path / k).is_relative_to(root)
        }
        naive = Path(os.path.normpath(os.path.join(root, path.replace("\x00", ""))))
        naive_existed = os.path.lexists(naive)

        try:
            written = ws.write(path, "pwned")
        except (WorkspaceError, OpenCrabError):
            written = None
            event("refused")
            assert tree(root) == {}  # a refused write leaves nothing behind
        if written is not None:
            event("written")
            assert written == 5
            files = [p for p in root.rglob("*") if p.is_file()]
            assert len(files) == 1
            assert files[0].read_text() == "pwned"
            assert files[0].resolve().is_relative_to(root.resolve())
            assert files[0].resolve() != root.resolve()
            assert ws.read(path) == "pwned"

        after = {k: v for k, v in tree(tmp_path).items() if not (tmp_path / k).is_relative_to(root)}
        assert after == before
        assert (sentinel / "keep.txt").read_text() == "untouched"
        if not naive.is_relative_to(root) and not naive_existed:
            assert not os.path.lexists(naive)
    finally:
        shutil.rmtree(base)


def test_the_file_count_cap_refuses_a_new_file_but_not_a_rewrite(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "capped", max_size_bytes=1000, max_files=2)
    ws.write("a.txt", "a")
    ws.write("sub/b.txt", "b")
    with pytest.raises(QuotaExceeded, match=r"holds 2 files.*max_workspace_files"):
        ws.write("c.txt", "c")
    assert ws.write("a.txt", "rewritten") == 9
    ws.delete("sub")
    ws.write("c.txt", "c")
    assert sorted(e.path for e in ws.walk()) == ["a.txt", "c.txt"]


def test_for_agent_uses_the_configured_file_cap(settings: Settings) -> None:
    capped = load_settings(overrides={"agent": {"max_workspace_files": 7}})
    assert Workspace.for_agent(capped, "x").max_files == 7
    assert Workspace.for_agent(settings, "x").max_files == 10_000
