"""The workspace before an execute_command run, handed to the command's user.

The tree is walked through directory file descriptors (each folder opened with
O_NOFOLLOW below its parent's descriptor, entries changed with `dir_fd` and no link
followed), so a command that swaps a folder for a symlink meanwhile cannot make the
server (root, perhaps) chown anything outside the workspace.

`prepare` counts what the workspace holds and, when the command runs as another user
(a root server), gives every entry to that user: files the server wrote (0600, root's)
stay readable and writable for the command. The server, root, keeps reading and
deleting what the command writes whatever its mode.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from opencrab.core.workspace import Usage

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_O_PATH = getattr(os, "O_PATH", 0)


@dataclass(frozen=True)
class Before:
    """The regular files (relative paths) and Usage of a workspace before a run."""

    files: frozenset[str]
    usage: Usage


def prepare(root: Path, owner: tuple[int, int] | None) -> Before:
    """Count the workspace; with `owner` (uid, gid), give every entry in it to them."""
    root.mkdir(parents=True, exist_ok=True)
    files: set[str] = set()
    size = 0
    top = os.open(root, _DIR_FLAGS)
    try:
        if owner is not None:
            os.chown(top, *owner)
        for folder, name, path, info in _walk(top):
            if owner is not None and (info.st_uid, info.st_gid) != owner:
                with contextlib.suppress(FileNotFoundError):
                    os.chown(name, *owner, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                files.add(path)
                size += info.st_size
    finally:
        os.close(top)
    return Before(frozenset(files), Usage(size, len(files)))


def _walk(top: int) -> Iterator[tuple[int, str, str, os.stat_result]]:
    """(folder fd, name, relative path, lstat) of every entry below the folder `top`,
    depth first; no link is followed and a folder swapped for a link is skipped."""
    stack: list[tuple[int, str, Iterator[tuple[str, os.stat_result]]]] = [(top, "", _entries(top))]
    try:
        while stack:
            folder, prefix, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if folder != top:
                    os.close(folder)
                continue
            name, info = entry
            yield folder, name, prefix + name, info
            if stat.S_ISDIR(info.st_mode):
                child = _open_folder(folder, name)
                if child is not None:
                    stack.append((child, f"{prefix}{name}/", _entries(child)))
    finally:
        for folder, _, _ in stack:
            if folder != top:
                os.close(folder)


def _entries(folder: int) -> Iterator[tuple[str, os.stat_result]]:
    """A folder's (name, lstat) pairs, read at once (the folder may change meanwhile)."""
    listed = []
    with os.scandir(folder) as scan:
        for item in scan:
            try:
                listed.append((item.name, item.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue  # removed since the folder was read
    return iter(listed)


def _open_folder(parent: int, name: str) -> int | None:
    """`name` below `parent` opened as a folder, never through a link; None when gone.

    A folder its owner made unreadable (mode 000) is given u+rwx back first, so a server
    that is not root still counts what is in it."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        pass
    except (FileNotFoundError, NotADirectoryError, OSError):
        return None  # gone, or swapped for a link (ELOOP): nothing of ours to walk
    try:
        handle = os.open(name, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError:
        return None
    try:  # chmod through the handle: the folder itself, whatever its name is now
        mode = os.stat(handle).st_mode
        os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(mode) | stat.S_IRWXU)
        return os.open(f"/proc/self/fd/{handle}", _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return None
    finally:
        os.close(handle)
