"""The data directory is its owner's alone: the folder 0700, the database and key files 0600.

The data directory holds the database (every conversation, the token hashes, the
encrypted API keys) and `secret.key`, which decrypts those keys. `secure_data_dir`
creates the folder with mode 0700 and a new SQLite file with 0600 before SQLite opens it
(SQLite gives its -wal and -shm files the mode of the database file), so nothing is ever
readable by other users, whatever the umask. Found looser (made by an older version, or
copied in), the folder, the database files and `secret.key` are tightened, and each
change is logged. Every command that opens the store runs it (opencrab.cli.common).

Example:
    secure_data_dir(Path("data"), Path("data/opencrab.db"))  # -> ["data: 0755 -> 0700"]
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from opencrab.config.secret_key import FILE_NAME as KEY_FILE

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def secure_data_dir(data_dir: Path, db_file: Path | None) -> list[str]:
    """Create `data_dir` (0700) and `db_file` (0600) when missing; tighten them, the
    SQLite side files and `secret.key` when others may read them. Returns the changes
    made, as "path: old -> new" (each is also logged); what cannot be changed (a folder
    of another owner, a read-only mount) is left to fail where it is used."""
    with contextlib.suppress(OSError):
        data_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    changes = [_tighten(data_dir, DIR_MODE)]
    files = [data_dir / KEY_FILE]
    if db_file is not None:
        with contextlib.suppress(OSError):
            db_file.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.close(os.open(db_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        files += [db_file, *(db_file.with_name(db_file.name + s) for s in SQLITE_SIDE_FILES)]
    changes += [_tighten(path, FILE_MODE) for path in files]
    return [change for change in changes if change]


def sqlite_file(url: str) -> Path | None:
    """The database file a SQLite URL names (None for PostgreSQL, memory, a `uri=true` URL)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None  # Database names the problem
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    return None if parsed.query.get("uri") else Path(database).expanduser()


def _tighten(path: Path, mode: int) -> str | None:
    """Take the group's and others' permissions off `path` (never follows a symlink)."""
    try:
        found = stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return None
    if stat.S_ISLNK(os.lstat(path).st_mode) or not found & ~mode:
        return None
    try:
        os.chmod(path, found & mode)
    except OSError as exc:
        log.warning(
            "%s is open to other users (mode %04o) and cannot be tightened: %s",
            path,
            found,
            exc.strerror,
        )
        return None
    change = f"{path}: {found:04o} -> {found & mode:04o}"
    log.warning("tightened %s: other users could read it", change)
    return change
