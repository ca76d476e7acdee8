"""Workspace (seed 001 "Workspace"): an agent's private folder, jailed and size-capped.

Every path an agent (or a model's tool call) names is relative to the agent's root and
checked before the filesystem is touched (docs/architecture.md, "Security defaults"):

- refused outright: empty names where a file is needed, NUL and other control
  characters, absolute paths, Windows drive letters and UNC prefixes, backslashes,
  `..` components, a component over 255 bytes, a path over 1,024 characters, a path
  that with the workspace's own location is over the system's limit once UTF-8 encoded
  (errors name the path as the agent gave it, never the server's absolute location);
- then the path is opened relative to the root's file descriptor by the jail
  (core/jail.py: openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or an O_NOFOLLOW walk
  of descriptors), never checked and then reopened by name: a symlink anywhere in the
  path is refused in the same call that opens it, so a link planted by a command, even
  a folder swapped for one while the call runs, cannot lead outside. Listing, stat,
  delete, mkdir and the write's rename go by name relative to a folder's descriptor
  opened that way;
- writes are atomic (temp file + rename in the same folder) and refused with
  QuotaExceeded when the workspace would go over its quota (100 MB by default) or a
  new file would go over its file count (`[agent] max_workspace_files`, 10,000).

What a workspace holds (bytes and regular files) is a running figure, not a walk per
write: a UsageTracker, one per root in this process and shared by every Workspace
opened on it (each turn, each request), counts the tree once when first needed, then
each write and delete through Workspace changes it under the tracker's lock. Changes
made behind its back (by hand, by another process) are found by `reconcile_usage`, and
before a write is refused the tree is counted again if the last count is older than
RECONCILE_SECS (so a loop of refused writes cannot make it walk every time).

Writes that take time (uploads, core/workspace_upload.py) reserve their bytes, and a
new file's place, on the tracker before each piece is written; every check counts
what is reserved as already used, so writes running side by side never add up to more
than the quota.

Example:
    ws = Workspace.for_agent(settings, agent_id)
    ws.write("notes/today.md", "# Today\\n")
    ws.edit("notes/today.md", "Today", "Monday")
    [e.name for e in ws.list("notes")]   # ["today.md"]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from opencrab.config import Settings
from opencrab.core import jail
from opencrab.errors import NotFoundError, QuotaExceeded, WorkspaceError

MB = 1024 * 1024
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
RECONCILE_SECS = 30.0  # a refusal recounts the tree when the last count is older
# room kept below the system's limit for the temp file a write puts beside its target
_TEMP_NAME_ROOM = 32


def _system_path_max() -> int:
    try:
        return max(256, os.pathconf("/", "PC_PATH_MAX"))
    except (OSError, ValueError, AttributeError):
        return 4096  # Linux's PATH_MAX


SYSTEM_PATH_MAX = _system_path_max()


@dataclass(frozen=True)
class FileEntry:
    """One entry of a workspace folder; `path` is relative to the workspace root."""

    name: str
    path: str
    is_dir: bool
    size: int
    modified: datetime


@dataclass(frozen=True)
class Usage:
    """What a workspace holds: the bytes of its regular files and how many there are."""

    bytes: int
    files: int


class UsageTracker:
    """A workspace root's running Usage in this process; see the module docstring.

    Change the tree only while holding `lock`, then `change` the figure by what changed;
    `forget` it when unsure (an error half-way), and the next `figure` counts again.
    """

    _by_root: ClassVar[dict[str, UsageTracker]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.clock: Callable[[], float] = time.monotonic
        self.counted_at: float | None = None  # when the tree was last counted
        self._usage: Usage | None = None
        self.reserved = Usage(0, 0)  # promised to writes in flight, not yet in the figure
        self.uploads = 0  # uploads in flight (their temp files are not in the tree)

    @classmethod
    def for_root(cls, root: Path) -> UsageTracker:
        """The one tracker of `root` in this process."""
        key = str(root)
        found = cls._by_root.get(key)  # made once: a turn asks for it on every start
        if found is not None:
            return found
        with cls._registry_lock:
            return cls._by_root.setdefault(key, cls())

    def figure(self, count: Callable[[], Usage]) -> Usage:
        """The running figure; `count` (a walk of the tree) gives it when there is none."""
        with self.lock:
            if self._usage is None:
                return self.reconcile(count)
            return self._usage

    def reconcile(self, count: Callable[[], Usage]) -> Usage:
        """Count the tree again and keep that as the figure."""
        with self.lock:
            self._usage = count()
            self.counted_at = self.clock()
            return self._usage

    def stale(self) -> bool:
        """True when the last count is older than RECONCILE_SECS (or there was none)."""
        return self.counted_at is None or self.clock() - self.counted_at >= RECONCILE_SECS

    def change(self, size: int, files: int) -> None:
        """Add `size` bytes and `files` files (negative for removals) to the figure."""
        with self.lock:
            if self._usage is not None:
                self._usage = Usage(self._usage.bytes + size, self._usage.files + files)

    def forget(self) -> None:
        """Drop the figure: the next `figure` counts the tree again."""
        with self.lock:
            self._usage = None


class Workspace:
    """An agent's jailed folder; see the module docstring."""

    def __init__(
        self, root: Path | str, *, max_size_bytes: int = 100 * MB, max_files: int = 10_000
    ) -> None:
        self.root = Path(root).absolute()
        self.max_size_bytes = max_size_bytes
        self.max_files = max_files
        self.usage_tracker = UsageTracker.for_root(self.root)

    @classmethod
    def for_agent(cls, settings: Settings, agent_id: str) -> Workspace:
        """The workspace at `[agent] workspace_path` with the configured quota and file cap."""
        agent = settings.agent
        root = agent.workspace_path.replace("{data_dir}", str(settings.data_dir)).replace(
            "{agent_id}", str(agent_id)
        )
        return cls(
            root,
            max_size_bytes=agent.max_workspace_size_mb * MB,
            max_files=agent.max_workspace_files,
        )

    # ------------------------------------------------------------ paths
    def check(self, path: str, *, allow_root: bool = False) -> tuple[str, ...]:
        """The path's components after every lexical check; WorkspaceError names the rule."""
        if not isinstance(path, str):
            raise WorkspaceError(f"path must be a string, not {type(path).__name__}")
        shown = repr(path[:80])
        if len(path) > MAX_PATH_CHARS:
            raise WorkspaceError(f"path is longer than {MAX_PATH_CHARS} characters")
        if "\x00" in path:
            raise WorkspaceError(f"path {shown} contains a NUL byte")
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            raise WorkspaceError(f"path {shown} contains a control character")
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise WorkspaceError(f"path {shown} is not valid Unicode (a lone surrogate)") from None
        if "\\" in path:
            raise WorkspaceError(f"path {shown} contains a backslash; use '/' between folders")
        if path.startswith("/"):
            raise WorkspaceError(f"path {shown} is absolute; give it relative to your workspace")
        parts = tuple(p for p in path.split("/") if p not in ("", "."))
        first = parts[0] if parts else ""
        if len(first) >= 2 and first[1] == ":" and first[0].isalpha():
            # also after "./": the path must mean the same wherever it is checked again
            raise WorkspaceError(f"path {shown} names a drive; give it relative to your workspace")
        if ".." in parts:
            raise WorkspaceError(f"path {shown} contains '..'; paths cannot leave your workspace")
        for part in parts:
            if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                raise WorkspaceError(
                    f"a name in path {shown} is longer than {MAX_NAME_BYTES} bytes"
                )
        if not parts and not allow_root:
            raise WorkspaceError("path is empty; name a file or folder in your workspace")
        encoded = sum(len(p.encode("utf-8")) + 1 for p in parts)
        if len(os.fsencode(self.root)) + encoded + _TEMP_NAME_ROOM >= SYSTEM_PATH_MAX:
            raise WorkspaceError(
                f"path {shown} is {encoded} bytes in UTF-8, which inside your workspace is "
                f"over the system's limit of {SYSTEM_PATH_MAX} bytes; use shorter names or "
                "fewer folders"
            )
        return parts

    def resolve(self, path: str, *, allow_root: bool = False, final_link: bool = False) -> Path:
        """The absolute location of `path`, refused if it or any parent is a symlink.

        For naming the place only: nothing is ever opened by this name (a folder on the
        way may be swapped for a link right after), every opening goes through the jail.
        `final_link` lets the last component be a link (to delete the link itself).
        """
        parts = self.check(path, allow_root=allow_root)
        if not parts:
            return self.root
        try:
            if final_link:
                with self._folder(path, parts[:-1]):
                    pass
            else:
                self.entry(path)
        except (FileNotFoundError, NotFoundError):
            pass  # nothing further exists, so nothing further can be a link
        except OSError as exc:
            raise WorkspaceError(f"path {path!r}: {exc.strerror}") from exc
        return self.root.joinpath(*parts)

    def relative(self, location: Path) -> str:
        return location.relative_to(self.root).as_posix()

    @contextlib.contextmanager
    def _folder(self, path: str, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder `parts` below the root, through no symlink (the
        root and the missing folders on the way made when `create`); OSError as the
        kernel gives it (FileNotFoundError, NotADirectoryError), WorkspaceError for a link."""
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        root = os.open(self.root, _ROOT_FLAGS)
        try:
            folder = jail.open_folder(root, parts, create=create)
        except OSError as exc:
            _raise_for_link(path, exc)
            raise
        finally:
            os.close(root)
        try:
            yield folder
        finally:
            os.close(folder)

    def _open(self, path: str, parts: Sequence[str], flags: int) -> int:
        """A descriptor of `parts` below the root opened with `flags`, through no symlink."""
        root = os.open(self.root, _ROOT_FLAGS)
        try:
            return jail.open_beneath(root, parts, flags)
        except OSError as exc:
            _raise_for_link(path, exc)
            raise
        finally:
            os.close(root)

    # ------------------------------------------------------------ reading
    def exists(self, path: str) -> bool:
        parts = self.check(path, allow_root=True)
        try:
            with self._folder(path, parts[:-1]) as folder:
                if parts:
                    os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def entry(self, path: str) -> FileEntry | None:
        """The file or folder at `path` (not the root), None when there is none."""
        parts = self.check(path)
        try:
            with self._folder(path, parts[:-1]) as folder:
                info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(info.st_mode):
            raise WorkspaceError(f"path {path!r} goes through a symbolic link; refused")
        return _entry(parts[-1], "/".join(parts), info)

    def read_bytes(self, path: str) -> bytes:
        parts = self.check(path)
        try:
            fd = self._open(path, parts, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise NotFoundError(f"no file {path!r} in your workspace") from None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {path!r}: {exc.strerror}") from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise WorkspaceError(f"{path!r} is a folder, not a file; use ws_list")
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def read(self, path: str) -> str:
        """A file's text (UTF-8); a binary file is refused with a clear error."""
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError(f"{path!r} is not UTF-8 text ({len(data)} bytes)") from None

    def list(self, path: str = "") -> list[FileEntry]:
        """A folder's entries, folders first, then by name."""
        parts = self.check(path, allow_root=True)
        try:
            fd = self._open(path, parts, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            if not parts:
                return []  # a new agent's workspace before its first write
            raise NotFoundError(f"no folder {path!r} in your workspace") from None
        except OSError as exc:
            raise WorkspaceError(f"path {path!r}: {exc.strerror}") from exc
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise WorkspaceError(f"{path!r} is a file, not a folder")
            entries = [entry for entry, _ in _scan(fd, parts)]
        finally:
            os.close(fd)
        entries.sort(key=lambda e: (not e.is_dir, e.name))
        return entries

    def walk(self, below: str = "") -> Iterator[FileEntry]:
        """Every file below the root, or below its folder `below` (no symlinks followed).

        Each folder is opened beneath the root through no symlink; one removed or
        swapped for a link while it is walked is skipped (another writer's delete).
        """
        parts = self.check(below, allow_root=True)
        try:
            root = os.open(self.root, _ROOT_FLAGS)
        except FileNotFoundError:
            return
        try:
            stack = [parts]
            while stack:
                folder = stack.pop()
                try:
                    fd = jail.open_folder(root, folder)
                except OSError:
                    continue
                try:
                    for entry, mode in _scan(fd, folder):
                        if stat.S_ISDIR(mode):
                            stack.append((*folder, entry.name))
                        elif stat.S_ISREG(mode):
                            yield entry
                finally:
                    os.close(fd)
        finally:
            os.close(root)

    def usage(self) -> Usage:
        """The workspace's running Usage (the tree is counted only when first needed)."""
        return self.usage_tracker.figure(self._count)

    def usage_bytes(self) -> int:
        """The bytes the workspace holds, from the running figure."""
        return self.usage().bytes

    def reconcile_usage(self) -> Usage:
        """Count the tree again (changes made by hand are then known) and return it."""
        return self.usage_tracker.reconcile(self._count)

    def _count(self, below: str = "") -> Usage:
        size = files = 0
        for entry in self.walk(below):
            size += entry.size
            files += 1
        return Usage(size, files)

    # ------------------------------------------------------------ writing
    def write(self, path: str, content: str | bytes) -> int:
        """Create or replace a file atomically; returns the bytes written.

        The bytes go to a temp file in the target's folder, renamed over the target,
        both by name relative to that folder's descriptor (never through a link)."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        tracker = self.usage_tracker
        with tracker.lock:
            old_size, existed = self.file_size(path)
            self.admit(path, len(data) - old_size, 0 if existed else 1)
            with self.parent_folder(path, create=True) as (folder, name):
                try:
                    jail.replace_file(folder, name, data)
                except IsADirectoryError:
                    raise WorkspaceError(f"{path!r} is a folder; choose a file name") from None
            tracker.change(len(data) - old_size, 0 if existed else 1)
        return len(data)

    @contextlib.contextmanager
    def parent_folder(self, path: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(a descriptor of the folder holding the file `path`, the file's name), opened
        beneath the root through no symlink; `create` makes the missing folders."""
        parts = self.check(path)
        try:
            with self._folder(path, parts[:-1], create=create) as folder:
                yield folder, parts[-1]
        except NotADirectoryError:
            raise WorkspaceError(f"a parent of {path!r} is a file, not a folder") from None

    def file_size(self, path: str) -> tuple[int, bool]:
        """(size, True) for a regular file at `path`, (0, False) when there is none or it
        is no regular file; a folder or a link there is refused."""
        try:
            with self.parent_folder(path) as (folder, name):
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return 0, False
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceError(f"{path!r} is a folder; choose a file name")
        if stat.S_ISLNK(info.st_mode):
            raise WorkspaceError(f"path {path!r} goes through a symbolic link; refused")
        if not stat.S_ISREG(info.st_mode):
            return 0, False
        return info.st_size, True

    def admit(self, path: str, size: int, files: int) -> None:
        """QuotaExceeded unless `size` more bytes and `files` more files fit, counting
        what is reserved as used; hold the tracker's lock until the write is done."""
        tracker = self.usage_tracker
        with tracker.lock:
            usage = self.usage()
            if not self._fits(usage, size, files) and tracker.stale():
                usage = self.reconcile_usage()  # maybe space was freed by hand
            reserved = tracker.reserved
            if files > 0 and usage.files + reserved.files + files > self.max_files:
                raise QuotaExceeded(
                    f"cannot create {path!r}: your workspace holds {usage.files + reserved.files}"
                    f" files, its limit is {self.max_files} files ([agent] max_workspace_files);"
                    " delete some first"
                )
            total = usage.bytes + reserved.bytes + size
            if size > 0 and total > self.max_size_bytes:
                raise QuotaExceeded(
                    f"writing {size} more bytes to {path!r} would take your workspace to "
                    f"{total} bytes, over its quota of {self.max_size_bytes} bytes; "
                    "delete something first"
                )

    def _fits(self, usage: Usage, size: int, files: int) -> bool:
        reserved = self.usage_tracker.reserved
        bytes_ok = size <= 0 or usage.bytes + reserved.bytes + size <= self.max_size_bytes
        files_ok = files <= 0 or usage.files + reserved.files + files <= self.max_files
        return bytes_ok and files_ok

    def edit(self, path: str, old: str, new: str) -> int:
        """Replace the one occurrence of `old` with `new`; returns the file's new size."""
        if not old:
            raise WorkspaceError("old_string is empty; give the exact text to replace")
        with self.usage_tracker.lock:  # no other write lands between the read and the write
            text = self.read(path)
            count = text.count(old)
            if count == 0:
                raise WorkspaceError(f"old_string was not found in {path!r}")
            if count > 1:
                raise WorkspaceError(
                    f"old_string appears {count} times in {path!r}; include more surrounding "
                    "text so that it is unique"
                )
            return self.write(path, text.replace(old, new, 1))

    def mkdir(self, path: str) -> None:
        """Create a folder and its parents; an existing folder is fine."""
        with self.parent_folder(path, create=True) as (folder, name):
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=folder)
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            raise WorkspaceError(f"path {path!r} goes through a symbolic link; refused")
        if not stat.S_ISDIR(mode):
            raise WorkspaceError(f"{path!r} is a file, not a folder")

    def delete(self, path: str) -> None:
        """Delete a file, or a folder with everything in it; the root cannot be deleted.

        A link is removed itself, never what it points to; a folder is removed by
        shutil.rmtree relative to its parent's descriptor (which follows no link)."""
        missing = NotFoundError(f"no file or folder {path!r} in your workspace")
        tracker = self.usage_tracker
        with tracker.lock:
            try:
                with self.parent_folder(path) as (folder, name):
                    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if stat.S_ISDIR(info.st_mode):
                        held = self._count(path)
                        try:
                            shutil.rmtree(name, dir_fd=folder)
                        except BaseException:
                            tracker.forget()  # some of it may be gone: count again when needed
                            raise
                        tracker.change(-held.bytes, -held.files)
                        return
                    os.unlink(name, dir_fd=folder)
            except FileNotFoundError:
                raise missing from None
            regular = stat.S_ISREG(info.st_mode)
            tracker.change(-info.st_size if regular else 0, -1 if regular else 0)


_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _raise_for_link(path: str, exc: OSError) -> None:
    """WorkspaceError when the jail refused `path` for a symlink on the way."""
    if exc.errno in jail.SYMLINK_ERRNOS:
        raise WorkspaceError(f"path {path!r} goes through a symbolic link; refused") from exc


def _entry(name: str, path: str, info: os.stat_result) -> FileEntry:
    is_dir = stat.S_ISDIR(info.st_mode)
    return FileEntry(
        name=name,
        path=path,
        is_dir=is_dir,
        size=0 if is_dir else info.st_size,
        modified=datetime.fromtimestamp(info.st_mtime, UTC),
    )


def _scan(fd: int, parts: Sequence[str]) -> Iterator[tuple[FileEntry, int]]:
    """The entries of the open folder `fd` (at `parts`) with their modes; no link followed,
    an entry removed since the folder was read is left out."""
    with os.scandir(fd) as scan:
        for item in scan:
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since the scan listed it (another write's temp file)
            yield _entry(item.name, "/".join((*parts, item.name)), info), info.st_mode
