"""Full-text search across imported transcripts.

What is indexed: the text of every user and assistant message an import stores (one
`import_texts` row per message part, the same text its `user` / `message` AgentEvent
holds); tool calls, tool outputs, reasoning and meta lines are not. The importer fills
the index as it stores (`opencrab.importers.store`); sessions imported before the index
existed (migration 0023) are indexed from their stored lines on the first search
(`catch_up`). Terms are matched literally and must all occur; terms of three characters
or more use the trigram index (SQLite FTS5, PostgreSQL pg_trgm), shorter ones a LIKE.

Example:
    hits = search(db, "東京 weather", limit=20)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from opencrab.errors import ValidationError
from opencrab.importers.common import parse_time
from opencrab.importers.rows import text_row
from opencrab.importers.sessions import session_lines
from opencrab.importers.store import SOURCES
from opencrab.store import Database
from opencrab.store.repositories import imports as imports_repo
from opencrab.store.types import utcnow

SNIPPET_CHARS = 160
MAX_TERMS = 8


@dataclass(frozen=True)
class SearchHit:
    """One message whose text holds every term, with the part around the first one."""

    session_id: str
    session_title: str | None
    source: str
    line: int
    role: str
    timestamp: datetime
    snippet: str


def catch_up(db: Database) -> int:
    """Index the texts of import sessions stored before the index had them; how many
    sessions it indexed (0 once every session is)."""
    with db.read() as conn:
        waiting = imports_repo.unindexed(conn)
    for row in waiting:
        source = SOURCES[row.source]
        scanned = source.scan(session_lines(db, row.id), row.file_path, mtime=row.file_mtime)
        fallback = row.started_at or row.created_at or utcnow()
        rows = [
            text_row(
                row.id,
                entry,
                "user" if entry.kind == "user" else "assistant",
                parse_time(entry.timestamp) or fallback,
            )
            for entry in scanned.entries
            if entry.kind in ("user", "assistant")
            and entry.text
            and entry.line > row.texts_indexed_lines
        ]
        with db.write() as conn:
            imports_repo.add_texts(conn, rows)
            imports_repo.set_texts_indexed(conn, row.id, row.lines)
    return len(waiting)


def terms_of(query: str) -> tuple[str, ...]:
    """The terms of a query: its words (split at white space), each matched literally."""
    if "\x00" in query:  # neither FTS5 nor PostgreSQL text can hold it
        raise ValidationError("the search query contains a NUL character")
    terms = tuple(dict.fromkeys(query.split()))
    if not terms:
        raise ValidationError("the search query `q` is empty: give one or more words")
    if len(terms) > MAX_TERMS:
        raise ValidationError(f"the search query has {len(terms)} words; at most {MAX_TERMS}")
    return terms


def search(db: Database, query: str, *, limit: int = 50, offset: int = 0) -> list[SearchHit]:
    """Imported messages holding every word of `query`, newest first."""
    terms = terms_of(query)
    catch_up(db)
    with db.read() as conn:
        found = imports_repo.search_texts(conn, terms, limit=limit, offset=offset)
    return [
        SearchHit(
            str(r.session_id),
            r.title,
            r.source,
            r.line,
            r.role,
            r.timestamp,
            snippet(r.text, terms),
        )
        for r in found
    ]


def snippet(text: str, terms: tuple[str, ...]) -> str:
    """The part of `text` around the first term found (…-marked where it is cut)."""
    lowered = text.lower()
    places = [p for p in (lowered.find(t.lower()) for t in terms) if p >= 0]
    at = min(places) if places else 0
    start = max(0, at - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    part = " ".join(text[start:end].split())
    return ("…" if start else "") + part + ("…" if end < len(text) else "")
