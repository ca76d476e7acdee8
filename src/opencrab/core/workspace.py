"""Workspace (seed 001 "Workspace"): an agent's private folder, jailed and size-capped.

Every path an agent (or a model's tool call) names is relative to the agent's root and
checked before the filesystem is touched (DESIGN.md "Security defaults"):

- refused outright: empty names where a file is needed, NUL and other control
  characters, absolute paths, Windows drive letters and UNC prefixes, backslashes,
  `..` components, a component over 255 bytes, a path over 1,024 characters, a path
  that with the workspace's own location is over the system's limit once UTF-8 encoded
  (errors name the path as the agent gave it, never the server's absolute location);
- then every existing component below the root is checked with lstat: a symlink
  anywhere in the path is refused (and files are opened with O_NOFOLLOW), so a link
  planted by some other means still cannot lead outside;
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
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from opencrab.config import Settings
from opencrab.errors import NotFoundError, QuotaExceeded, WorkspaceError

MB = 1024 * 1024
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
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
        with cls._registry_lock:
            return cls._by_root.setdefault(str(root), cls())

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

        `final_link` lets the last component be a link (to delete the link itself).
        """
        parts = self.check(path, allow_root=allow_root)
        current = self.root
        for index, part in enumerate(parts):
            current = current / part
            if final_link and index == len(parts) - 1:
                break
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                break  # nothing further exists, so nothing further can be a link
            except OSError as exc:
                raise WorkspaceError(f"path {path!r}: {exc.strerror}") from exc
            if stat.S_ISLNK(mode):
                raise WorkspaceError(f"path {path!r} goes through a symbolic link; refused")
        return self.root.joinpath(*parts)

    def relative(self, location: Path) -> str:
        return location.relative_to(self.root).as_posix()

    # ------------------------------------------------------------ reading
    def exists(self, path: str) -> bool:
        return os.path.lexists(self.resolve(path, allow_root=True))

    def read_bytes(self, path: str) -> bytes:
        location = self.resolve(path)
        try:
            fd = os.open(location, os.O_RDONLY | _O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            raise NotFoundError(f"no file {path!r} in your workspace") from None
        except IsADirectoryError:
            raise WorkspaceError(f"{path!r} is a folder; use ws_list") from None
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
        location = self.resolve(path, allow_root=True)
        if not location.exists():
            if not path.strip("/."):
                return []  # a new agent's workspace before its first write
            raise NotFoundError(f"no folder {path!r} in your workspace")
        if not location.is_dir():
            raise WorkspaceError(f"{path!r} is a file, not a folder")
        entries = []
        with os.scandir(location) as scan:
            for item in scan:
                try:
                    info = item.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed since the scan listed it (another write's temp file)
                is_dir = stat.S_ISDIR(info.st_mode)
                entries.append(
                    FileEntry(
                        name=item.name,
                        path=self.relative(Path(item.path)),
                        is_dir=is_dir,
                        size=0 if is_dir else info.st_size,
                        modified=datetime.fromtimestamp(info.st_mtime, UTC),
                    )
                )
        entries.sort(key=lambda e: (not e.is_dir, e.name))
        return entries

    def walk(self, below: Path | None = None) -> Iterator[FileEntry]:
        """Every file below the root, or below its folder `below` (no symlinks followed).

        A folder removed while it is walked is skipped (another writer's delete).
        """
        top = self.root if below is None else below
        if not top.is_dir():
            return
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                scan = os.scandir(folder)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with scan:
                for item in scan:
                    try:
                        info = item.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted since the folder was read
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(Path(item.path))
                    elif stat.S_ISREG(info.st_mode):
                        yield FileEntry(
                            name=item.name,
                            path=self.relative(Path(item.path)),
                            is_dir=False,
                            size=info.st_size,
                            modified=datetime.fromtimestamp(info.st_mtime, UTC),
                        )

    def usage(self) -> Usage:
        """The workspace's running Usage (the tree is counted only when first needed)."""
        return self.usage_tracker.figure(self._count)

    def usage_bytes(self) -> int:
        """The bytes the workspace holds, from the running figure."""
        return self.usage().bytes

    def reconcile_usage(self) -> Usage:
        """Count the tree again (changes made by hand are then known) and return it."""
        return self.usage_tracker.reconcile(self._count)

    def _count(self, below: Path | None = None) -> Usage:
        size = files = 0
        for entry in self.walk(below):
            size += entry.size
            files += 1
        return Usage(size, files)

    # ------------------------------------------------------------ writing
    def write(self, path: str, content: str | bytes) -> int:
        """Create or replace a file atomically; returns the bytes written."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        location = self.resolve(path)
        tracker = self.usage_tracker
        with tracker.lock:
            if location.is_dir():
                raise WorkspaceError(f"{path!r} is a folder; choose a file name")
            old_size, existed = _file_size(location)
            self.admit(path, len(data) - old_size, 0 if existed else 1)
            self._make_parents(path, location)
            fd, temp = tempfile.mkstemp(dir=location.parent, prefix=".tmp-", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, location)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
                raise
            tracker.change(len(data) - old_size, 0 if existed else 1)
        return len(data)

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
        location = self.resolve(path)
        if location.exists() and not location.is_dir():
            raise WorkspaceError(f"{path!r} is a file, not a folder")
        self._make_parents(path, location / "_")
        location.mkdir(exist_ok=True)

    def delete(self, path: str) -> None:
        """Delete a file, or a folder with everything in it; the root cannot be deleted."""
        location = self.resolve(path, final_link=True)
        tracker = self.usage_tracker
        with tracker.lock:
            if not os.path.lexists(location):
                raise NotFoundError(f"no file or folder {path!r} in your workspace")
            if location.is_symlink():
                location.unlink()  # the link itself, never what it points to
            elif location.is_dir():
                held = self._count(location)
                try:
                    shutil.rmtree(location)
                except BaseException:
                    tracker.forget()  # some of it may be gone: count again when needed
                    raise
                tracker.change(-held.bytes, -held.files)
            else:
                size, regular = _file_size(location)
                location.unlink()
                tracker.change(-size, -1 if regular else 0)

    def _make_parents(self, path: str, location: Path) -> None:
        parent = location.parent
        if parent.exists() and not parent.is_dir():
            raise WorkspaceError(f"a parent of {path!r} is a file, not a folder")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise WorkspaceError(f"a parent of {path!r} is a file, not a folder") from None
        except NotADirectoryError:
            raise WorkspaceError(f"a parent of {path!r} is a file, not a folder") from None
        # a link created between resolve() and here would still be caught on use, but
        # check again so the write below cannot land outside
        self.resolve(self.relative(parent), allow_root=True)


def _file_size(location: Path) -> tuple[int, bool]:
    """(size, True) for a regular file at `location`, else (0, False); no link followed."""
    try:
        info = os.lstat(location)
    except (FileNotFoundError, NotADirectoryError):
        return 0, False
    if not stat.S_ISREG(info.st_mode):
        return 0, False
    return info.st_size, True
