"""Reading imports back: import sessions, their problems, and their lines as seed 003
NormalizedMessages (normalized again from the lines as stored, so they outlive the
source file; see `opencrab.importers.store` for what an import writes)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
import zstandard

from opencrab.errors import NotFoundError
from opencrab.importers.common import Transcript
from opencrab.importers.store import SOURCES
from opencrab.store import Database
from opencrab.store.tables import import_chunks, import_problems, import_sessions


def import_session(db: Database, session_id: str) -> Any:
    """An import session's row (raises NotFoundError)."""
    with db.read() as conn:
        row = conn.execute(
            sa.select(import_sessions).where(import_sessions.c.id == session_id)
        ).first()
    if row is None:
        raise NotFoundError(f"no imported session {session_id}")
    return row


def import_sessions_page(
    db: Database,
    *,
    source: str | None = None,
    agent_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Any], int]:
    """Import sessions, the most recent first, and how many match in all."""
    t = import_sessions.c
    where = []
    if source is not None:
        where.append(t.source == source)
    if agent_id is not None:
        where.append(t.agent_id == agent_id)
    with db.read() as conn:
        total = conn.execute(
            sa.select(sa.func.count()).select_from(import_sessions).where(*where)
        ).scalar_one()
        rows = conn.execute(
            sa.select(import_sessions)
            .where(*where)
            .order_by(sa.func.coalesce(t.started_at, t.created_at).desc(), t.id)
            .limit(limit)
            .offset(offset)
        ).all()
    return list(rows), int(total)


def session_problems(db: Database, session_id: str) -> list[tuple[int, str]]:
    """(line, reason) of every problem an import session's lines had, in line order."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(import_problems.c.line, import_problems.c.reason)
            .where(import_problems.c.session_id == session_id)
            .order_by(import_problems.c.line, import_problems.c.id)
        ).all()
    return [(r.line, r.reason) for r in rows]


def session_lines(db: Database, session_id: str) -> list[bytes]:
    """An import session's lines exactly as they were read."""
    with db.read() as conn:
        chunks = conn.execute(
            sa.select(import_chunks.c.data)
            .where(import_chunks.c.session_id == session_id)
            .order_by(import_chunks.c.first_line)
        ).all()
    out = zstandard.ZstdDecompressor()
    lines: list[bytes] = []
    for (data,) in chunks:
        lines += out.decompressobj().decompress(data).splitlines(keepends=True)
    return lines


_NORMALIZED: dict[tuple[str, str, str], Transcript] = {}  # (id, path, SHA-256 of the lines)
_NORMALIZED_KEEP = 4


def normalized_messages(db: Database, session_id: str) -> tuple[Any, Transcript]:
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
