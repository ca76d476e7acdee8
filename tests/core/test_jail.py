"""The jail's primitives, each way it resolves a path: openat2 and the O_NOFOLLOW walk."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from opencrab.core import jail


@pytest.fixture
def root(tmp_path: Path) -> Iterator[int]:
    """A folder with d/f.txt, a file, and links out (to a folder and to a file)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "secret.txt").write_text("secret")
    top = tmp_path / "root"
    (top / "d").mkdir(parents=True)
    (top / "d" / "f.txt").write_text("inside")
    (top / "file.txt").write_text("file")
    os.symlink(tmp_path / "out", top / "l")
    os.symlink(tmp_path / "out" / "secret.txt", top / "d" / "link.txt")
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def read(fd: int) -> str:
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode()


def errno_of(call: Callable[..., int], *args: object, **kwargs: object) -> int:
    """The errno `call` fails with (0 when it opens something)."""
    try:
        os.close(call(*args, **kwargs))
    except OSError as exc:
        return exc.errno or -1
    return 0


def test_a_file_below_opens(root: int, jail_mode: str) -> None:
    assert read(jail.open_beneath(root, ("d", "f.txt"), os.O_RDONLY)) == "inside"


@pytest.mark.parametrize(
    "parts", [("l",), ("l", "secret.txt"), ("d", "link.txt"), ("l", "new", "x")]
)
def test_a_link_anywhere_is_eloop(root: int, jail_mode: str, parts: tuple[str, ...]) -> None:
    assert errno_of(jail.open_beneath, root, parts, os.O_RDONLY) == errno.ELOOP
    assert errno_of(jail.open_folder, root, parts) == errno.ELOOP
    assert errno_of(jail.open_folder, root, (*parts, "new"), create=True) == errno.ELOOP


def test_a_file_in_the_way_and_a_missing_name(root: int, jail_mode: str) -> None:
    assert errno_of(jail.open_beneath, root, ("file.txt", "x"), os.O_RDONLY) == errno.ENOTDIR
    assert errno_of(jail.open_folder, root, ("file.txt",)) == errno.ENOTDIR
    assert errno_of(jail.open_folder, root, ("file.txt", "x"), create=True) == errno.ENOTDIR
    assert errno_of(jail.open_beneath, root, ("nope", "x"), os.O_RDONLY) == errno.ENOENT


def test_create_makes_the_missing_folders(root: int, jail_mode: str) -> None:
    folder = jail.open_folder(root, ("d", "new", "deeper"), create=True)
    try:
        jail.replace_file(folder, "a.txt", b"made")
    finally:
        os.close(folder)
    assert read(jail.open_beneath(root, ("d", "new", "deeper", "a.txt"), os.O_RDONLY)) == "made"


def test_replace_file_replaces_a_link_never_its_target(root: int, tmp_path: Path) -> None:
    folder = jail.open_folder(root, ("d",))
    try:
        jail.replace_file(folder, "link.txt", b"replaced")
        assert not os.path.islink(tmp_path / "root" / "d" / "link.txt")
        assert sorted(os.listdir(folder)) == ["f.txt", "link.txt"]  # no temp file left
    finally:
        os.close(folder)
    assert (tmp_path / "out" / "secret.txt").read_text() == "secret"
