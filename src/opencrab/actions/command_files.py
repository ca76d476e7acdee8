"""The workspace around one execute_command run: before, handed to the command's user and
counted; after, counted again and brought back within its quota.

Every step walks the tree through directory file descriptors (each folder opened with
O_NOFOLLOW below its parent's descriptor, entries changed with `dir_fd` and no link
followed), so a command that swaps a folder for a symlink meanwhile cannot make the
server (root, perhaps) chown, count or delete anything outside the workspace.

- `prepare` counts what the workspace holds and, when the command runs as another user
  (a root server), gives every entry to that user: files the server wrote (0600, root's)
  stay readable and writable for the command. The server, root, keeps reading and
  deleting what the command writes whatever its mode.
- `settle` counts again. When the run took the workspace over `[agent]
  max_workspace_size_mb` or `max_workspace_files`, the regular files the run added
  (paths that were no regular file before) are removed, newest first, until both hold
  again; files that were there before are never removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from opencrab.core.workspace import Usage

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_O_PATH = getattr(os, "O_PATH", 0)


@dataclass(frozen=True)
class Before:
    """The regular files (relative paths) and Usage of a workspace before a run."""

    files: frozenset[str]
    usage: Usage


@dataclass
class Settled:
    """A workspace after a run: its Usage, what was removed, the limit it went over."""

    usage: Usage
    removed: list[str] = field(default_factory=list)
    over: str | None = None  # the message naming the limit, when it went over


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


def settle(root: Path, before: Before, max_bytes: int, max_files: int) -> Settled:
    """Count the workspace after a run; remove what the run added over its limits."""
    added: list[tuple[int, str, int]] = []  # (modified ns, path, size)
    size = files = 0
    with _opened(root) as top:
        for _, _, path, info in _walk(top):
            if stat.S_ISREG(info.st_mode):
                size += info.st_size
                files += 1
                if path not in before.files:
                    added.append((info.st_mtime_ns, path, info.st_size))
    settled = Settled(Usage(size, files))
    if size <= max_bytes and files <= max_files:
        return settled
    settled.over = _over_message(settled.usage, max_bytes, max_files)
    doomed: dict[str, int] = {}
    for _, path, file_size in sorted(added, reverse=True):  # newest first
        if size <= max_bytes and files <= max_files:
            break
        doomed[path] = file_size
        size -= file_size
        files -= 1
    settled.removed = _remove(root, doomed)
    gone = sum(doomed[path] for path in settled.removed)
    settled.usage = Usage(settled.usage.bytes - gone, settled.usage.files - len(settled.removed))
    return settled


def _over_message(usage: Usage, max_bytes: int, max_files: int) -> str:
    if usage.bytes > max_bytes:
        return (
            f"the command took your workspace to {usage.bytes} bytes, over its quota of "
            f"{max_bytes} bytes ([agent] max_workspace_size_mb)"
        )
    return (
        f"the command took your workspace to {usage.files} files, over its limit of "
        f"{max_files} files ([agent] max_workspace_files)"
    )


def _remove(root: Path, doomed: dict[str, int]) -> list[str]:
    """Unlink the regular files at these relative paths; the paths that were removed."""
    removed: list[str] = []
    if not doomed:
        return removed
    with _opened(root) as top:
        for folder, name, path, info in _walk(top):
            if path in doomed and stat.S_ISREG(info.st_mode):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=folder)
                    removed.append(path)
    return removed


@contextlib.contextmanager
def _opened(root: Path) -> Iterator[int]:
    top = os.open(root, _DIR_FLAGS)
    try:
        yield top
    finally:
        os.close(top)


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
