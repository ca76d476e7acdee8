"""MemoryManager (seed 001 "Memory"): what an agent keeps between turns.

Three stores, all keyed by the agent:

- curated memory (`memory_curated`): facts the agent or its operator chose to keep, by
  category ("core" is always in the prompt);
- session logs (`memory_sessions`): every speech, inner voice, action and system note,
  indexed by FTS5 with the trigram tokenizer so Japanese and Chinese search as well as
  English; `search` ranks with bm25 and quotes every term so query text is never FTS
  syntax; terms under 3 characters (which trigrams cannot index) filter with LIKE;
- impressions (`impressions`): what the agent thinks of others in a session, one row
  per session and target, updated field by field.

Example:
    memory = MemoryManager(db, agent_id)
    memory.append_session_log(SessionLog(session_id=s, log_type="speech", content="東京の話"))
    [hit.content for hit in memory.search("東京")]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import uuid4

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection

from opencrab.errors import NotFoundError, ValidationError
from opencrab.prompts import Language, prompts
from opencrab.store import Database
from opencrab.store.bulk import bulk_insert
from opencrab.store.dialects import sqlite as sqlite_dialect
from opencrab.store.prepared import Prepared
from opencrab.store.tables import impressions, memory_curated, memory_sessions
from opencrab.store.types import parse_timestamp

LogType = Literal["speech", "inner_voice", "action", "system"]
LOG_TYPES: tuple[str, ...] = ("speech", "inner_voice", "action", "system")
CONTEXT_CATEGORIES = ("core",)  # categories always put in the prompt, in this order
MAX_CONTEXT_CHARS = 4000
MIN_TRIGRAM_CHARS = 3
MAX_QUERY_CHARS = 1000
LOG_COLUMNS = (
    "agent_id",
    "session_id",
    "log_type",
    "content",
    "speaker_id",
    "turn_number",
    "metadata_json",
    "event_id",
    "created_at",
)


class CuratedMemory(BaseModel):
    id: str
    category: str
    content: str
    updated_at: datetime


class SessionLog(BaseModel):
    """One line of an agent's session log (seed `SessionLog`), before it is stored."""

    session_id: str
    log_type: LogType
    content: str
    speaker_id: str | None = None
    turn_number: int | None = None
    metadata: dict[str, Any] | None = None
    event_id: str | None = None  # the AgentEvent written in the same transaction


class StoredLog(SessionLog):
    id: int
    created_at: datetime


class SearchResult(StoredLog):
    score: float = Field(description="relevance: higher is better (negated bm25)")


class SessionSummary(BaseModel):
    session_id: str
    entries: int
    first_at: datetime
    last_at: datetime


class Impression(BaseModel):
    """What the agent thinks of another participant (seed `impressions` row)."""

    session_id: str
    target_id: str
    target_name: str
    personality: str = ""
    communication_style: str = ""
    recent_behavior: str = ""
    agreement: str = "中立"
    notes: str = ""
    last_updated_turn: int = 0
    updated_at: datetime | None = None


class MemoryManager:
    """One agent's memory; see the module docstring."""

    def __init__(self, db: Database, agent_id: str) -> None:
        self.db = db
        self.agent_id = str(agent_id)

    # ------------------------------------------------------------ curated memory
    def list_curated(self, category: str | None = None) -> list[CuratedMemory]:
        with self.db.read() as conn:
            if category is None:
                rows = _CURATED.rows(conn, agent_id=self.agent_id)
            else:
                rows = _CURATED_IN.rows(conn, agent_id=self.agent_id, category=category)
        return [
            CuratedMemory(id=r.id, category=r.category, content=r.content, updated_at=r.updated_at)
            for r in rows
        ]

    def save_curated(self, category: str, content: str, *, id: str | None = None) -> CuratedMemory:
        """Add a memory, or replace memory `id`'s category and content."""
        category = category.strip()
        if not category or len(category) > 64:
            raise ValidationError("category must be 1 to 64 characters")
        if not content.strip():
            raise ValidationError("memory content is empty")
        now = datetime.now(UTC)
        with self.db.write() as conn:
            if id is None:
                id = str(uuid4())
                conn.execute(
                    memory_curated.insert().values(
                        id=id,
                        agent_id=self.agent_id,
                        category=category,
                        content=content,
                        updated_at=now,
                    )
                )
            else:
                done = conn.execute(
                    memory_curated.update()
                    .where(memory_curated.c.id == id, memory_curated.c.agent_id == self.agent_id)
                    .values(category=category, content=content, updated_at=now)
                )
                if done.rowcount == 0:
                    raise NotFoundError(f"no memory {id} for this agent")
        return CuratedMemory(id=id, category=category, content=content, updated_at=now)

    def delete_curated(self, id: str) -> None:
        with self.db.write() as conn:
            done = conn.execute(
                memory_curated.delete().where(
                    memory_curated.c.id == id, memory_curated.c.agent_id == self.agent_id
                )
            )
        if done.rowcount == 0:
            raise NotFoundError(f"no memory {id} for this agent")

    # ------------------------------------------------------------ session logs
    def append_session_log(self, log: SessionLog, *, conn: Connection | None = None) -> None:
        self.append_session_logs([log], conn=conn)

    def append_session_logs(
        self, logs: Sequence[SessionLog], *, conn: Connection | None = None
    ) -> None:
        """Store log lines (in `conn`'s transaction when given); the FTS index follows."""
        if not logs:
            return
        now = datetime.now(UTC)
        rows = [
            (
                self.agent_id,
                log.session_id,
                log.log_type,
                log.content,
                log.speaker_id,
                log.turn_number,
                log.metadata,
                log.event_id,
                now,
            )
            for log in logs
        ]
        if conn is not None:
            bulk_insert(conn, memory_sessions, LOG_COLUMNS, rows)
        else:
            with self.db.write() as own:
                bulk_insert(own, memory_sessions, LOG_COLUMNS, rows)

    def session_logs(
        self,
        session_id: str,
        *,
        limit: int = 100,
        log_types: Iterable[str] | None = None,
    ) -> list[StoredLog]:
        """A session's latest `limit` lines, oldest first."""
        query = sa.select(memory_sessions).where(
            memory_sessions.c.agent_id == self.agent_id,
            memory_sessions.c.session_id == str(session_id),
        )
        if log_types is not None:
            query = query.where(memory_sessions.c.log_type.in_(list(log_types)))
        return self._latest(query, limit)

    def log_batches(self, session_id: str, *, batch: int = 500) -> Iterator[list[StoredLog]]:
        """All of a session's lines, oldest first, read `batch` at a time.

        Each batch is its own short read; lines written after the first batch was read
        are left out, so a long read neither blocks writers nor chases a live session.
        """
        m = memory_sessions.c
        mine = (m.agent_id == self.agent_id, m.session_id == str(session_id))
        with self.db.read() as conn:
            last = conn.execute(sa.select(sa.func.max(m.id)).where(*mine)).scalar()
        after = 0
        while last is not None and after < last:
            query = (
                sa.select(memory_sessions)
                .where(*mine, m.id > after, m.id <= last)
                .order_by(m.id)
                .limit(max(1, batch))
            )
            with self.db.read() as conn:
                rows = [_stored(row) for row in conn.execute(query)]
            if not rows:
                return
            yield rows
            after = rows[-1].id

    def recent_logs(self, *, limit: int = 100) -> list[StoredLog]:
        """The agent's latest `limit` lines across sessions, oldest first."""
        query = sa.select(memory_sessions).where(memory_sessions.c.agent_id == self.agent_id)
        return self._latest(query, limit)

    def _latest(self, query: sa.Select[Any], limit: int) -> list[StoredLog]:
        query = query.order_by(memory_sessions.c.id.desc()).limit(max(1, limit))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [_stored(row) for row in reversed(rows)]

    def sessions(self, *, limit: int | None = None) -> list[SessionSummary]:
        """Sessions the agent has logs in, newest activity first (the first `limit`)."""
        m = memory_sessions.c
        query = (
            sa.select(
                m.session_id,
                sa.func.count().label("entries"),
                sa.func.min(m.created_at).label("first_at"),
                sa.func.max(m.created_at).label("last_at"),
            )
            .where(m.agent_id == self.agent_id)
            .group_by(m.session_id)
            .order_by(sa.func.max(m.id).desc())
        )
        if limit is not None:
            query = query.limit(max(1, limit))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [
            SessionSummary(
                session_id=r.session_id,
                entries=r.entries,
                first_at=_as_datetime(r.first_at),
                last_at=_as_datetime(r.last_at),
            )
            for r in rows
        ]

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        session_id: str | None = None,
        log_types: Iterable[str] | None = None,
    ) -> list[SearchResult]:
        """Session log lines matching every word of `query`, best first.

        Works for any language: words of 3+ characters use the trigram FTS index and
        bm25; shorter words (e.g. two-character Japanese words) filter with LIKE.
        """
        terms = search_terms(query)
        if not terms:
            raise ValidationError("search query is empty")
        limit = max(1, min(int(limit), 100))
        types = list(log_types) if log_types is not None else []
        bad = [t for t in types if t not in LOG_TYPES]
        if bad:
            raise ValidationError(f"unknown log types {bad}; known: {', '.join(LOG_TYPES)}")
        long_terms = [t for t in terms if len(t) >= MIN_TRIGRAM_CHARS]
        short_terms = [t for t in terms if len(t) < MIN_TRIGRAM_CHARS]
        likes = {f"like_{i}": f"%{_like_escape(t)}%" for i, t in enumerate(short_terms)}
        index_pending(self.db)
        with self.db.read() as conn:
            if long_terms and self.db.dialect == "sqlite":
                sql = sqlite_dialect.search_memory_sql(
                    with_session=session_id is not None,
                    log_types=len(types),
                    short_terms=len(short_terms),
                )
                params: dict[str, Any] = {
                    "agent_id": self.agent_id,
                    "match": sqlite_dialect.fts_query(long_terms),
                    "limit": limit,
                    **likes,
                    **{f"log_type_{i}": t for i, t in enumerate(types)},
                }
                if session_id is not None:
                    params["session_id"] = str(session_id)
                ranked = [(r.id, -float(r.rank)) for r in conn.execute(sa.text(sql), params)]
            else:
                # only short words (or no FTS on this dialect): newest matching lines
                m = memory_sessions.c
                fallback = sa.select(m.id).where(m.agent_id == self.agent_id)
                for term in terms:
                    fallback = fallback.where(  # case-insensitive, as FTS5 trigram is
                        m.content.ilike(f"%{_like_escape(term)}%", escape="\\")
                    )
                if session_id is not None:
                    fallback = fallback.where(m.session_id == str(session_id))
                if types:
                    fallback = fallback.where(m.log_type.in_(types))
                fallback = fallback.order_by(m.id.desc()).limit(limit)
                ranked = [(row.id, 0.0) for row in conn.execute(fallback)]
            if not ranked:
                return []
            rows = {
                row.id: row
                for row in conn.execute(
                    sa.select(memory_sessions).where(
                        memory_sessions.c.id.in_([rid for rid, _ in ranked])
                    )
                )
            }
        return [
            SearchResult(**_stored(rows[rid]).model_dump(), score=score)
            for rid, score in ranked
            if rid in rows
        ]

    # ------------------------------------------------------------ impressions
    def update_impression(
        self,
        session_id: str,
        target_id: str,
        target_name: str,
        *,
        personality: str | None = None,
        communication_style: str | None = None,
        recent_behavior: str | None = None,
        agreement: str | None = None,
        notes: str | None = None,
        turn: int | None = None,
    ) -> Impression:
        """Create or update the impression of `target_id`; fields left None are kept."""
        if not str(target_id).strip() or not str(target_name).strip():
            raise ValidationError("target_id and target_name must not be empty")
        fields = {
            "personality": personality,
            "communication_style": communication_style,
            "recent_behavior": recent_behavior,
            "agreement": agreement,
            "notes": notes,
        }
        changes: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        now = datetime.now(UTC)
        t = impressions.c
        key = (
            t.agent_id == self.agent_id,
            t.session_id == str(session_id),
            t.target_id == str(target_id),
        )
        with self.db.write() as conn:
            row = conn.execute(sa.select(impressions).where(*key)).first()
            values = {**changes, "target_name": target_name, "updated_at": now}
            if turn is not None:
                values["last_updated_turn"] = turn
            if row is None:
                conn.execute(
                    impressions.insert().values(
                        id=str(uuid4()),
                        agent_id=self.agent_id,
                        session_id=str(session_id),
                        target_id=str(target_id),
                        created_at=now,
                        **values,
                    )
                )
            else:
                conn.execute(impressions.update().where(*key).values(**values))
            stored = conn.execute(sa.select(impressions).where(*key)).one()
        return _impression(stored)

    def impressions(self, session_id: str) -> list[Impression]:
        """The impressions kept in one session, by target name."""
        with self.db.read() as conn:
            rows = _IMPRESSIONS.rows(conn, agent_id=self.agent_id, session_id=str(session_id))
        return [_impression(row) for row in rows]

    def all_impressions(self) -> list[Impression]:
        """Every impression the agent keeps, by target name, newest first for each."""
        with self.db.read() as conn:
            rows = _ALL_IMPRESSIONS.rows(conn, agent_id=self.agent_id)
        return [_impression(row) for row in rows]

    # ------------------------------------------------------------ context
    def build_context(self, language: Language, *, session_id: str | None = None) -> str:
        """The 【MEMORY】 section: core memories and impressions in this session; "" if none."""
        texts = prompts(language)
        curated = [m for m in self.list_curated() if m.category in CONTEXT_CATEGORIES]
        lines: list[str] = []
        for memory in curated:
            lines.append(f"- {memory.content.strip()}")
        seen = self.impressions(session_id) if session_id else []
        if seen:
            lines.append(texts["memory_impressions"])
            for imp in seen:
                parts = [
                    p
                    for p in (
                        imp.personality,
                        imp.communication_style,
                        imp.recent_behavior,
                        texts.render("memory_agreement", agreement=imp.agreement)
                        if imp.agreement
                        else "",
                        imp.notes,
                    )
                    if p
                ]
                lines.append(f"- {imp.target_name}: {' / '.join(parts)}")
        if not lines:
            return ""
        text = texts["memory_header"] + "\n" + "\n".join(lines)
        if len(text) > MAX_CONTEXT_CHARS:
            text = text[: MAX_CONTEXT_CHARS - 1] + "…"
        return text


def search_terms(query: str) -> list[str]:
    """The words `search` looks for: split at whitespace, each once, in order."""
    if not isinstance(query, str):
        raise ValidationError("search query must be a string")
    cleaned = "".join(" " if ord(c) < 32 else c for c in query[:MAX_QUERY_CHARS])
    terms: list[str] = []
    for word in cleaned.split():
        if word not in terms:
            terms.append(word)
    return terms


def _like_escape(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _as_datetime(value: Any) -> datetime:
    """Aggregates (min/max) skip the column type, so SQLite gives back the stored text."""
    return value if isinstance(value, datetime) else parse_timestamp(value)


def _stored(row: Any) -> StoredLog:
    return StoredLog(
        id=row.id,
        session_id=row.session_id,
        log_type=row.log_type,
        content=row.content,
        speaker_id=row.speaker_id,
        turn_number=row.turn_number,
        metadata=row.metadata_json,
        event_id=row.event_id,
        created_at=row.created_at,
    )


def index_pending(db: Database) -> int:
    """Index the log lines written since the last search (SQLite's FTS5 queue).

    Lines are queued on write and indexed in one batch here, so writing a step stays
    cheap; `search` calls this first. Inside an open read transaction it does nothing
    (that snapshot could not see the new index anyway). Returns how many were indexed.
    """
    if db.dialect != "sqlite" or db.reading():
        return 0
    with db.read() as conn:
        if not sqlite_dialect.fts_pending(conn):
            return 0
    with db.write() as conn:
        return sqlite_dialect.fts_catch_up(conn)


_CURATED = Prepared(
    sa.select(memory_curated)
    .where(memory_curated.c.agent_id == sa.bindparam("agent_id"))
    .order_by(memory_curated.c.category, memory_curated.c.updated_at)
)
_CURATED_IN = Prepared(
    sa.select(memory_curated)
    .where(
        memory_curated.c.agent_id == sa.bindparam("agent_id"),
        memory_curated.c.category == sa.bindparam("category"),
    )
    .order_by(memory_curated.c.updated_at)
)
_IMPRESSIONS = Prepared(
    sa.select(impressions)
    .where(
        impressions.c.agent_id == sa.bindparam("agent_id"),
        impressions.c.session_id == sa.bindparam("session_id"),
    )
    .order_by(impressions.c.target_name)
)


_ALL_IMPRESSIONS = Prepared(
    sa.select(impressions)
    .where(impressions.c.agent_id == sa.bindparam("agent_id"))
    .order_by(impressions.c.target_name, impressions.c.updated_at.desc())
)


def _impression(row: Any) -> Impression:
    return Impression(
        session_id=row.session_id,
        target_id=row.target_id,
        target_name=row.target_name,
        personality=row.personality or "",
        communication_style=row.communication_style or "",
        recent_behavior=row.recent_behavior or "",
        agreement=row.agreement or "中立",
        notes=row.notes or "",
        last_updated_turn=row.last_updated_turn or 0,
        updated_at=row.updated_at,
    )


def append_log_rows(conn: Connection, rows: Sequence[Sequence[Any]]) -> None:
    """Store prepared session log rows (LOG_COLUMNS order) in `conn`'s transaction, in one
    executemany (bulk writers such as the transcript importer); the FTS index follows."""
    bulk_insert(conn, memory_sessions, LOG_COLUMNS, rows)
