"""Reading imports back: import sessions, their problems, and their lines as seed 003
NormalizedMessages (normalized again from the lines as stored, so they outlive the
source file; see `opencrab.importers.store` for what an import writes)."""

from __future__ import annotations

from typing import Unpack

import zstandard

from opencrab.errors import NotFoundError
from opencrab.importers.common import Transcript
from opencrab.importers.store import SOURCES
from opencrab.store import Database
from opencrab.store.repositories import imports as imports_repo
from opencrab.store.repositories.imports import DayCost, ImportSession, SessionQuery


def import_session(db: Database, session_id: str) -> ImportSession:
    """An import session's row (raises NotFoundError)."""
    with db.read() as conn:
        row = imports_repo.get(conn, session_id)
    if row is None:
        raise NotFoundError(f"no imported session {session_id}")
    return row


def import_sessions_page(
    db: Database, **query: Unpack[SessionQuery]
) -> tuple[list[ImportSession], int]:
    """Import sessions in `sort` order (newest, cost_desc, cost_asc), and how many match."""
    with db.read() as conn:
        return imports_repo.page(conn, **query)


def import_facets(db: Database) -> dict[str, list[str]]:
    """The days, projects and models import sessions can be filtered by."""
    with db.read() as conn:
        return imports_repo.facets(conn)


def import_cost_by_day(db: Database) -> list[DayCost]:
    """What imported model calls cost per UTC day and model, oldest day first."""
    with db.read() as conn:
        return imports_repo.cost_by_day_model(conn)


def session_problems(db: Database, session_id: str) -> list[tuple[int, str]]:
    """(line, reason) of every problem an import session's lines had, in line order."""
    with db.read() as conn:
        return imports_repo.problems(conn, session_id)


def session_lines(db: Database, session_id: str) -> list[bytes]:
    """An import session's lines as stored (as read, but those that are no transcript's as
    their SHA-256: see `opencrab.importers.store`)."""
    with db.read() as conn:
        chunks = imports_repo.chunks(conn, session_id)
    out = zstandard.ZstdDecompressor()
    lines: list[bytes] = []
    for data in chunks:
        lines += out.decompressobj().decompress(data).splitlines(keepends=True)
    return lines


_NORMALIZED: dict[tuple[str, str, str], Transcript] = {}  # (id, path, SHA-256 of the lines)
_NORMALIZED_KEEP = 4


def normalized_messages(db: Database, session_id: str) -> tuple[ImportSession, Transcript]:
    """An import session's row and its lines as NormalizedMessages (seed 003), parsed
    again from the stored lines (the last few sessions asked for are kept parsed)."""
    row = import_session(db, session_id)
    key = (session_id, row.file_path, row.prefix_sha256)
    found = _NORMALIZED.get(key)
    if found is None:
        parse = SOURCES[row.source].parse
        found = parse(session_lines(db, session_id), row.file_path, mtime=row.file_mtime)
        _NORMALIZED[key] = found
        while len(_NORMALIZED) > _NORMALIZED_KEEP:
            del _NORMALIZED[next(iter(_NORMALIZED))]
    return row, found
