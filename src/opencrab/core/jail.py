"""Opening a path beneath a folder's file descriptor, through no symbolic link.

A path checked and then opened again by name can change in between: a command run in
a workspace can swap a folder for a symlink (renameat2 RENAME_EXCHANGE) right after the
check (issue 31 §2). So a workspace path is never handed to the kernel whole from `/`:
it is opened relative to the workspace root's descriptor, and the kernel itself refuses
a symlink on the way, in the same call that opens the file:

- `openat2(2)` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (Linux 5.6+, called through
  ctypes) where the kernel has it (`HAS_OPENAT2`);
- else a walk: each folder opened with O_NOFOLLOW | O_DIRECTORY relative to the one
  before it, the last component with O_NOFOLLOW relative to its parent.

A symlink anywhere on the way is OSError ELOOP (EXDEV from openat2 for a way out); the
caller names the path. Paths come here already checked by Workspace.check: relative
components with no `..`, `.` or empty names.

Example:
    fd = open_beneath(root_fd, ("notes", "today.md"), os.O_RDONLY)
    folder = open_folder(root_fd, ("notes", "2026"), create=True)
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import secrets
import stat
import sys
from collections.abc import Sequence

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
SYMLINK_ERRNOS = frozenset({errno.ELOOP, errno.EXDEV})  # a link, or a way out of the folder

_SYS_OPENAT2 = 437  # one number on every architecture of the unified syscall table
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_AT_FDCWD = -100
_RETRIES = 16  # openat2 answers EAGAIN when a rename raced it; try again


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


def _libc_syscall() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if sys.platform != "linux" or platform.machine() in ("alpha", "ia64", "mips", "mips64"):
        return None  # numbered differently there: use the walk
    try:
        function = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_long
    return function


_syscall = _libc_syscall()


def _openat2(dir_fd: int, relative: str, flags: int, resolve: int = _RESOLVE) -> int:
    assert _syscall is not None
    how = _OpenHow(flags=flags, mode=0, resolve=resolve)
    name = os.fsencode(relative)
    for _ in range(_RETRIES):
        fd = int(
            _syscall(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(name),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code not in (errno.EAGAIN, errno.EINTR):
            raise OSError(code, os.strerror(code), relative)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), relative)


def _probe() -> bool:
    """True when openat2 works here (a container's seccomp filter may refuse it)."""
    if _syscall is None:
        return False
    try:
        os.close(_openat2(_AT_FDCWD, "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0))
    except OSError:
        return False
    return True


HAS_OPENAT2 = _probe()


def open_beneath(dir_fd: int, parts: Sequence[str], flags: int) -> int:
    """A descriptor of `parts` below `dir_fd` opened with `flags` (plus O_NOFOLLOW and
    O_CLOEXEC); OSError ELOOP when any component, the last included, is a symlink."""
    flags |= _NOFOLLOW
    if not parts:
        return os.open(".", flags, dir_fd=dir_fd)
    if HAS_OPENAT2:
        return _openat2(dir_fd, "/".join(parts), flags)
    folder = open_folder(dir_fd, parts[:-1])
    try:
        return os.open(parts[-1], flags, dir_fd=folder)
    finally:
        os.close(folder)


def open_folder(dir_fd: int, parts: Sequence[str], *, create: bool = False) -> int:
    """A descriptor of the folder `parts` below `dir_fd`, each step refusing a symlink
    (ELOOP); `create` makes the missing folders on the way."""
    if HAS_OPENAT2 and not create and parts:
        try:
            return _openat2(dir_fd, "/".join(parts), FOLDER_FLAGS)
        except NotADirectoryError:
            parent = open_folder(dir_fd, parts[:-1])  # which one is it: a link or a file?
            try:
                _raise_for_link(parent, parts[-1])
            finally:
                os.close(parent)
            raise
    current = os.open(".", FOLDER_FLAGS, dir_fd=dir_fd)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=current)
            try:
                step = os.open(part, FOLDER_FLAGS, dir_fd=current)
            except NotADirectoryError:
                _raise_for_link(current, part)
                raise
            os.close(current)
            current = step
    except BaseException:
        os.close(current)
        raise
    return current


def _raise_for_link(dir_fd: int, name: str) -> None:
    """ELOOP when `name` in `dir_fd` is a symlink (O_DIRECTORY | O_NOFOLLOW on a link
    fails with ENOTDIR, as for a file)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return
    if stat.S_ISLNK(mode):
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)


def replace_file(folder_fd: int, name: str, data: bytes) -> None:
    """Put `data` at `name` in the folder atomically: written to a new temp file there
    (0600, `.tmp-…part`), synced, renamed over `name`, each by name relative to
    `folder_fd`; a link at `name` is replaced, never followed."""
    temp, fd = _temp_file(folder_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder_fd)
        raise


def _temp_file(folder_fd: int) -> tuple[str, int]:
    """A new file's name and descriptor in the folder (O_EXCL: never an existing one)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    while True:
        name = f".tmp-{secrets.token_hex(4)}.part"
        try:
            return name, os.open(name, flags, 0o600, dir_fd=folder_fd)
        except FileExistsError:
            continue
