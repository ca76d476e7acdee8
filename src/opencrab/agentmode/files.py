"""Session files: one JSON file per session, `{sessions_dir}/{session_id}.json`.

The file is the session's source of truth (the database only indexes it). A save is
atomic: the text goes to a temporary file in the same directory (mode 0600), is
fsynced and renamed over the old file, and the directory is fsynced; a crash leaves
the old file or the new one, never half of either. The directory is made with mode
0700. A session is checked (`validation.check_session`) before it is written, so
nothing invalid is ever stored.

A file that does not parse as a session is moved aside to
`{session_id}.json.corrupt-<UTC timestamp>` and reported (`CorruptSessionFile`),
never silently dropped: `load` raises SessionFileCorrupt naming both paths, `scan`
returns it beside the sessions that loaded.

Example:
    files = SessionFiles(settings.agent_mode.sessions_path)
    files.save(session)
    sessions, corrupt = files.scan()
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError as PydanticError

from opencrab.agentmode.model import AgentSession, dump_session, load_session_json
from opencrab.agentmode.validation import check_session
from opencrab.errors import NotFoundError, StoreError, ValidationError

FILE_MODE = 0o600
DIR_MODE = 0o700
_FILE_ID = re.compile(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
)


@dataclass(frozen=True)
class CorruptSessionFile:
    """A session file that did not parse: where it was, where it went, why."""

    path: Path
    moved_to: Path
    reason: str


class SessionFileCorrupt(StoreError):
    """A session file did not parse; it was moved aside (both paths are named)."""

    code = "corrupt_session_file"

    def __init__(self, problem: CorruptSessionFile) -> None:
        self.problem = problem
        super().__init__(
            f"session file {problem.path} is corrupt ({problem.reason}); "
            f"it was moved to {problem.moved_to}"
        )


def _check_file_id(session_id: str) -> str:
    """The id, if it can name a file (a UUID's shape; nothing that walks paths)."""
    if not _FILE_ID.fullmatch(session_id):
        raise ValidationError(f"session id {session_id!r} is not a UUID")
    return session_id


class SessionFiles:
    """The directory of session files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path_for(self, session_id: str) -> Path:
        """The file of a session (its id is checked to be a UUID first)."""
        return self.directory / f"{_check_file_id(session_id)}.json"

    def ensure_dir(self) -> None:
        """Create the directory (mode 0700) when missing."""
        if not self.directory.is_dir():
            self.directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            self.directory.chmod(DIR_MODE)

    def save(self, session: AgentSession) -> Path:
        """Check the session and write its file atomically (mode 0600); returns the path."""
        check_session(session)
        path = self.path_for(session.id)
        self.ensure_dir()
        data = dump_session(session).encode()
        fd, temp = tempfile.mkstemp(prefix=f".{session.id}.", suffix=".tmp", dir=self.directory)
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            Path(temp).replace(path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                Path(temp).unlink()
            raise
        _fsync_dir(self.directory)
        return path

    def load(self, session_id: str) -> AgentSession:
        """The session from its file: NotFoundError when there is none, SessionFileCorrupt
        (after moving the file aside) when it does not parse."""
        path = self.path_for(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"agent-mode session {session_id} not found") from None
        return self._parse(path, data, session_id)

    def scan(self) -> tuple[list[AgentSession], list[CorruptSessionFile]]:
        """Every session file's session, and the files that did not parse (moved aside)."""
        sessions: list[AgentSession] = []
        corrupt: list[CorruptSessionFile] = []
        if not self.directory.is_dir():
            return sessions, corrupt
        for path in sorted(self.directory.glob("*.json")):
            if not _FILE_ID.fullmatch(path.stem):
                continue
            try:
                sessions.append(self._parse(path, path.read_bytes(), path.stem))
            except SessionFileCorrupt as exc:
                corrupt.append(exc.problem)
            except FileNotFoundError:  # removed meanwhile
                continue
        return sessions, corrupt

    def delete(self, session_id: str) -> bool:
        """Remove a session's file; False when there was none."""
        try:
            self.path_for(session_id).unlink()
        except FileNotFoundError:
            return False
        _fsync_dir(self.directory)
        return True

    def _parse(self, path: Path, data: bytes, session_id: str) -> AgentSession:
        try:
            session = load_session_json(data)
        except PydanticError as exc:
            reason = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
                for err in exc.errors()[:5]
            )
            raise SessionFileCorrupt(self._move_aside(path, reason)) from None
        if session.id != session_id:
            reason = f"it holds session {session.id!r}, not {session_id!r}"
            raise SessionFileCorrupt(self._move_aside(path, reason))
        return session

    def _move_aside(self, path: Path, reason: str) -> CorruptSessionFile:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        path.replace(target)
        _fsync_dir(path.parent)
        return CorruptSessionFile(path=path, moved_to=target, reason=reason)


def _fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
