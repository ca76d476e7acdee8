"""Where an import started over the API may read: the allow-list `[imports] roots`.

`POST /api/imports` (and the dashboard's import form, which calls it) names a path on
the server; it is imported only when its real path (symlinks resolved) lies under one
of the roots, themselves resolved. A path outside them and a path that does not exist
get the same answer (`NOT_FOUND`), so the API tells nothing about the rest of the disk.
Each file found under an allowed folder is checked again when it is read (a symlink
inside a root that points outside is not followed out). `opencrab import` on the
command line is run by a local user on their own files and has no allow-list.

Example:
    roots = ImportRoots.of(["~/.codex/sessions", "~/.claude/projects"])
    where = roots.check("/home/me/.codex/sessions/2026")   # the resolved Path
    roots.holds(where / "rollout-1.jsonl")                 # True
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from opencrab.errors import ValidationError

NOT_FOUND = "is not a file or folder under the import roots"
"""The one answer for a path that is missing, outside the roots, or both."""


@dataclass(frozen=True)
class ImportRoots:
    """The folders imports may read from, as configured and resolved."""

    given: tuple[str, ...]
    resolved: tuple[Path, ...]

    @classmethod
    def of(cls, roots: Iterable[str]) -> ImportRoots:
        """The roots of `[imports] roots` (`~` expanded, symlinks resolved)."""
        given = tuple(roots)
        return cls(given, tuple(Path(os.path.realpath(Path(r).expanduser())) for r in given))

    def holds(self, path: Path) -> bool:
        """True when `path`'s real path is a root or lies under one."""
        real = Path(os.path.realpath(path))
        return any(real == root or root in real.parents for root in self.resolved)

    def check(self, path: str) -> Path:
        """The real path of `path` when it exists under a root and the server may read it,
        else a ValidationError (the same one whether it is missing or not allowed)."""
        if not path.strip():
            raise ValidationError("give the path of a file or directory on the server")
        if "\x00" in path:
            raise ValidationError("the path holds a NUL character")
        where = Path(path).expanduser()
        if not where.is_absolute():
            raise ValidationError(f"{path!r} is not an absolute path on the server")
        real = Path(os.path.realpath(where))
        if not self.holds(real) or not (real.is_file() or real.is_dir()):
            raise ValidationError(f"{where} {NOT_FOUND} ({self.described()})")
        if not os.access(real, os.R_OK | (os.X_OK if real.is_dir() else 0)):
            raise ValidationError(f"{where} is not readable by the server")
        return real

    def described(self) -> str:
        """The roots as configured, for an error message."""
        if not self.given:
            return "[imports] roots is empty: imports over the API are off"
        return "[imports] roots: " + ", ".join(self.given)
