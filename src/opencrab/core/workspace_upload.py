"""A file streamed into a workspace: reserved before it is written, renamed into place.

An upload can be far larger than what a server should hold in memory, and several can
run at once. So the bytes go to a temp file as they arrive, and before each piece is
written its room is reserved on the workspace's UsageTracker (under its lock, counting
every other reservation as used): uploads side by side never add up to more than the
quota, and one that would is refused (QuotaExceeded) before its bytes touch the disk. A
new file's place is reserved the same way against `[agent] max_workspace_files`.

Temp files live in a hidden folder beside the workspace (`.<name>.uploads`, the same
filesystem, so the final rename is atomic): they are never listed nor counted in the
tree, their bytes are counted by the reservation alone. `commit` renames the file into
place, by name relative to its folder's descriptor opened through the jail (a folder
swapped for a link meanwhile cannot take it outside), and moves its size from the
reservation to the running figure in one step under the lock; `close` without a commit
deletes the temp file and frees the reservation, so a refused or broken upload leaves
nothing behind. Temp files of a crashed process are removed when the next upload starts
and no other is in flight.

Example:
    with Upload(ws, "data/big.csv", expected=len(body)) as upload:
        for piece in pieces:
            upload.write(piece)
        created = upload.commit()
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from types import TracebackType

from opencrab.core.workspace import Usage, Workspace
from opencrab.errors import WorkspaceError


class Upload:
    """One file being streamed into a workspace; see the module docstring."""

    def __init__(self, ws: Workspace, path: str, *, expected: int | None = None) -> None:
        self.ws = ws
        self.path = path
        self.tracker = ws.usage_tracker
        self.written = 0
        self.granted = Usage(0, 0)  # what this upload holds of tracker.reserved
        self._done = False
        with self.tracker.lock:
            # the file it replaces (a folder or a link there is refused)
            self.credit, existed = ws.file_size(path)
            self._reserve(expected or 0, 0 if existed else 1)
            folder = self.temp_folder(ws)
            try:
                if self.tracker.uploads == 0:
                    _clear(folder)  # left by a process that stopped mid-upload
                folder.mkdir(parents=True, exist_ok=True)
                fd, temp = tempfile.mkstemp(dir=folder, prefix="upload-", suffix=".part")
            except BaseException:
                self._release()
                raise
            self.tracker.uploads += 1
        self.temp = Path(temp)
        self._file = os.fdopen(fd, "wb")

    @staticmethod
    def temp_folder(ws: Workspace) -> Path:
        """Where uploads to `ws` are written until they are complete."""
        return ws.root.parent / f".{ws.root.name}.uploads"

    def write(self, data: bytes | bytearray) -> None:
        """Append `data`, reserving its room first (QuotaExceeded when it does not fit)."""
        missing = self.written + len(data) - self.granted.bytes
        if missing > 0:
            with self.tracker.lock:
                self._reserve(missing, 0)
        self._file.write(data)
        self.written += len(data)

    def commit(self) -> bool:
        """Put the file in place; True when it is new. The reservation becomes usage."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        with self.tracker.lock:
            old_size, existed = self.ws.file_size(self.path)
            self._release()  # checked again, exactly, without this upload's own share
            self.ws.admit(self.path, self.written - old_size, 0 if existed else 1)
            with self.ws.parent_folder(self.path, create=True) as (folder, name):
                try:  # by name relative to its folder's descriptor, through no link
                    os.replace(self.temp, name, dst_dir_fd=folder)
                except IsADirectoryError:
                    raise WorkspaceError(f"{self.path!r} is a folder; choose a file name") from None
            self._done = True
            self.tracker.change(self.written - old_size, 0 if existed else 1)
        return not existed

    def close(self) -> None:
        """Give the upload up unless it was committed: temp file deleted, room freed."""
        if not self._file.closed:
            self._file.close()
        with self.tracker.lock:
            if not self._done:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.temp)
            self._release()
            self.tracker.uploads -= 1
            self._done = True

    def __enter__(self) -> Upload:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------ reservations
    def _reserve(self, size: int, files: int) -> None:
        """Hold `size` more bytes (beyond the file it replaces) and `files` more files."""
        already = self.granted.bytes
        over_credit = max(already + size - self.credit, 0) - max(already - self.credit, 0)
        self.ws.admit(self.path, over_credit, files)
        self.granted = _plus(self.granted, Usage(size, files))
        self.tracker.reserved = _plus(self.tracker.reserved, Usage(over_credit, files))

    def _release(self) -> None:
        held = Usage(max(self.granted.bytes - self.credit, 0), self.granted.files)
        self.tracker.reserved = _plus(self.tracker.reserved, Usage(-held.bytes, -held.files))
        self.granted = Usage(0, 0)


def _plus(a: Usage, b: Usage) -> Usage:
    return Usage(a.bytes + b.bytes, a.files + b.files)


def _clear(folder: Path) -> None:
    if not folder.is_dir():
        return
    for item in folder.iterdir():
        with contextlib.suppress(OSError):
            item.unlink()
