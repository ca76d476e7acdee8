"""The memory repository: curated memory, session logs (with search) and impressions.

The only code that reads and writes `memory_curated`, `memory_sessions` and
`impressions`; every function takes the agent's id and returns typed values. Search is
the dialect's (`opencrab.store.dialects.search_memory`): FTS5 on SQLite, pg_trgm-indexed
ILIKE ranked with bm25 on PostgreSQL.

Example:
    with db.write() as conn:
        append_logs(conn, agent_id, [SessionLog(session_id=s, log_type="speech", content="…")])
    hits = search(db, agent_id, ["東京"], limit=10)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import uuid4

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection

from opencrab.errors import NotFoundError
from opencrab.store import Database
from opencrab.store.advisory import hold
from opencrab.store.bulk import bulk_insert
from opencrab.store.dialects import MemoryQuery, search_memory
from opencrab.store.dialects import sqlite as sqlite_dialect
from opencrab.store.prepared import Prepared
from opencrab.store.tables import impressions, memory_curated, memory_sessions
from opencrab.store.types import parse_timestamp

LogType = Literal["speech", "inner_voice", "action", "system"]
LOG_TYPES: tuple[str, ...] = ("speech", "inner_voice", "action", "system")
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
    created_at: datetime | None = None  # when it was first kept
    times_seen: int = 1  # how often it was said (the same said again is merged into it)


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
    score: float = Field(
        description="relevance: higher is better (negated bm25 for the lexical leg alone; "
        "the reciprocal-rank fusion of both legs in a hybrid search)"
    )
    legs: list[Literal["lexical", "vector"]] = Field(
        default_factory=list, description="the search legs that found the line"
    )


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


# ------------------------------------------------------------------ curated memory
def list_curated(db: Database, agent_id: str, category: str | None = None) -> list[CuratedMemory]:
    """The agent's curated memories (of one category when given)."""
    with db.read() as conn:
        if category is None:
            rows = _CURATED.rows(conn, agent_id=agent_id)
        else:
            rows = _CURATED_IN.rows(conn, agent_id=agent_id, category=category)
    return [_curated(r) for r in rows]


def queue_context_reads(conn: Connection, agent_id: str, session_id: str | None) -> None:
    """Send the reads of an agent's memory section ahead (`list_curated`, and
    `session_impressions` of `session_id`): Prepared.queue, one round trip with others."""
    _CURATED.queue(conn, agent_id=agent_id)
    if session_id is not None:
        _IMPRESSIONS.queue(conn, agent_id=agent_id, session_id=str(session_id))


def save_curated(
    db: Database, agent_id: str, category: str, content: str, id: str | None = None
) -> CuratedMemory:
    """Add a memory, or replace memory `id`'s category and content (NotFoundError if none)."""
    now = datetime.now(UTC)
    with db.write() as conn:
        if id is None:
            id = str(uuid4())
            conn.execute(
                memory_curated.insert().values(
                    id=id,
                    agent_id=agent_id,
                    category=category,
                    content=content,
                    updated_at=now,
                    created_at=now,
                )
            )
        else:
            done = conn.execute(
                memory_curated.update()
                .where(memory_curated.c.id == id, memory_curated.c.agent_id == agent_id)
                .values(category=category, content=content, updated_at=now)
            )
            if done.rowcount == 0:
                raise NotFoundError(f"no memory {id} for this agent")
        row = conn.execute(sa.select(memory_curated).where(memory_curated.c.id == id)).one()
    return _curated(row)


Same = Callable[[str, str], bool]
"""Whether two memory texts say the same (core/memory.py `says_the_same`)."""


def remember_curated(
    db: Database, agent_id: str, category: str, content: str, same: Same
) -> tuple[CuratedMemory, bool]:
    """Add a memory of `category`, unless one of that category says the same (`same`):
    then that older one is kept (its id and creation time), its `times_seen` counted up,
    its `updated_at` set to now and its text replaced by `content` when that is longer.
    Returns the memory and whether it was merged. One transaction, serialised per agent
    and category (advisory lock), so two writers never both add the same."""
    now = datetime.now(UTC)
    c = memory_curated.c
    with db.write() as conn:
        hold(conn, [f"memory-curated:{agent_id}:{category}"])
        rows = conn.execute(
            sa.select(c.id, c.content)
            .where(c.agent_id == agent_id, c.category == category)
            .order_by(sa.func.coalesce(c.created_at, c.updated_at), c.id)
        ).all()
        match = next((r for r in rows if same(r.content, content)), None)
        if match is None:
            id = str(uuid4())
            conn.execute(
                memory_curated.insert().values(
                    id=id,
                    agent_id=agent_id,
                    category=category,
                    content=content,
                    updated_at=now,
                    created_at=now,
                )
            )
        else:
            id = match.id
            values: dict[str, Any] = {"updated_at": now, "times_seen": c.times_seen + 1}
            if len(content.strip()) > len(match.content.strip()):
                values["content"] = content
            conn.execute(memory_curated.update().where(c.id == id).values(**values))
        row = conn.execute(sa.select(memory_curated).where(c.id == id)).one()
    return _curated(row), match is not None


def delete_curated(db: Database, agent_id: str, id: str) -> None:
    """Forget one curated memory (NotFoundError if the agent has none with this id)."""
    with db.write() as conn:
        done = conn.execute(
            memory_curated.delete().where(
                memory_curated.c.id == id, memory_curated.c.agent_id == agent_id
            )
        )
    if done.rowcount == 0:
        raise NotFoundError(f"no memory {id} for this agent")


# ------------------------------------------------------------------ session logs
def append_logs(conn: Connection, agent_id: str, logs: Sequence[SessionLog]) -> None:
    """Store log lines in `conn`'s transaction (the search index follows)."""
    if not logs:
        return
    now = datetime.now(UTC)
    rows = [
        (
            agent_id,
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
    bulk_insert(conn, memory_sessions, LOG_COLUMNS, rows)


def append_log_rows(
    conn: Connection, rows: Sequence[Sequence[Any]], *, bound: bool = False
) -> None:
    """Store prepared session log rows (LOG_COLUMNS order) in `conn`'s transaction, in one
    executemany (bulk writers such as the transcript importer); the FTS index follows.
    `bound`: the rows are in the driver's form already (`bulk_insert`'s `bound`)."""
    bulk_insert(conn, memory_sessions, LOG_COLUMNS, rows, bound=bound)


def latest_logs(
    db: Database,
    agent_id: str,
    *,
    limit: int,
    session_id: str | None = None,
    log_types: Sequence[str] | None = None,
) -> list[StoredLog]:
    """The agent's latest `limit` lines (of one session, of some types), oldest first."""
    m = memory_sessions.c
    query = sa.select(memory_sessions).where(m.agent_id == agent_id)
    if session_id is not None:
        query = query.where(m.session_id == session_id)
    if log_types is not None:
        query = query.where(m.log_type.in_(list(log_types)))
    query = query.order_by(m.id.desc()).limit(max(1, limit))
    with db.read() as conn:
        rows = conn.execute(query).all()
    return [_stored(row) for row in reversed(rows)]


def log_batches(
    db: Database, agent_id: str, session_id: str, *, batch: int = 500
) -> Iterator[list[StoredLog]]:
    """All of a session's lines, oldest first, read `batch` at a time (each its own read);
    lines written after the first batch was read are left out."""
    m = memory_sessions.c
    mine = (m.agent_id == agent_id, m.session_id == session_id)
    with db.read() as conn:
        last = conn.execute(sa.select(sa.func.max(m.id)).where(*mine)).scalar()
    after = 0
    while last is not None and after < last:
        query = (
            sa.select(memory_sessions)
            .where(*mine, m.id > after, m.id <= last)
            .order_by(m.id)
            .limit(max(1, batch))
        )
        with db.read() as conn:
            rows = [_stored(row) for row in conn.execute(query)]
        if not rows:
            return
        yield rows
        after = rows[-1].id


def log_sessions(db: Database, agent_id: str, *, limit: int | None = None) -> list[SessionSummary]:
    """Sessions the agent has logs in, newest activity first (the first `limit`)."""
    m = memory_sessions.c
    query = (
        sa.select(
            m.session_id,
            sa.func.count().label("entries"),
            sa.func.min(m.created_at).label("first_at"),
            sa.func.max(m.created_at).label("last_at"),
        )
        .where(m.agent_id == agent_id)
        .group_by(m.session_id)
        .order_by(sa.func.max(m.id).desc())
    )
    if limit is not None:
        query = query.limit(max(1, limit))
    with db.read() as conn:
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


def _query(
    agent_id: str,
    terms: Sequence[str],
    limit: int,
    session_id: str | None,
    log_types: Sequence[str],
    since: datetime | None,
    until: datetime | None,
) -> MemoryQuery:
    return MemoryQuery(
        agent_id=agent_id,
        terms=tuple(terms),
        limit=limit,
        session_id=session_id,
        log_types=tuple(log_types),
        since=since,
        until=until,
    )


def search_ranked(
    db: Database,
    agent_id: str,
    terms: Sequence[str],
    *,
    limit: int,
    session_id: str | None = None,
    log_types: Sequence[str] = (),
) -> list[tuple[int, float]]:
    """`search`'s hits as (line id, score), best first, without reading the lines: the
    hybrid search reads only the lines its fusion keeps (`logs_by_ids`)."""
    query = _query(agent_id, terms, limit, session_id, log_types, None, None)
    index_pending(db)
    with db.read() as conn:
        return search_memory(conn, query)


def search(
    db: Database,
    agent_id: str,
    terms: Sequence[str],
    *,
    limit: int,
    session_id: str | None = None,
    log_types: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[SearchResult]:
    """The agent's lines containing every term (written in [since, until) when given),
    best first (see `opencrab.store.dialects`); with no term, the newest lines."""
    query = _query(agent_id, terms, limit, session_id, log_types, since, until)
    index_pending(db)
    with db.read() as conn:
        ranked = search_memory(conn, query)
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


def logs_by_ids(db: Database, agent_id: str, ids: Sequence[int]) -> dict[int, StoredLog]:
    """The agent's lines among `ids`, by id (a line deleted meanwhile is left out)."""
    if not ids:
        return {}
    # by primary key alone: with the agent in the WHERE clause SQLite walks the agent's
    # index (every line of the agent) instead; the agent is checked on the rows found
    with db.read() as conn:
        query = sa.select(memory_sessions).where(memory_sessions.c.id.in_(list(ids)))
        return {
            int(row.id): _stored(row) for row in conn.execute(query) if row.agent_id == agent_id
        }


def index_pending(db: Database) -> int:
    """Index the log lines written since the last search (SQLite's FTS5 queue).

    Lines are queued on write and indexed in one batch here, so writing a step stays
    cheap; `search` calls this first. Inside an open read transaction it does nothing
    (that snapshot could not see the new index anyway). PostgreSQL's trigram index is
    kept by the database itself. Returns how many were indexed.
    """
    if db.dialect != "sqlite" or db.reading():
        return 0
    with db.read() as conn:
        if not sqlite_dialect.fts_pending(conn):
            return 0
    with db.write() as conn:
        return sqlite_dialect.fts_catch_up(conn)


def latest_log_ids(conn: Connection) -> dict[str, int]:
    """Each agent's highest session log id (new lines since a reflection show as more)."""
    m = memory_sessions.c
    return {
        str(r.agent_id): int(r.top)
        for r in conn.execute(
            sa.select(m.agent_id, sa.func.max(m.id).label("top")).group_by(m.agent_id)
        )
    }


def latest_speeches(
    conn: Connection, session_ids: Sequence[str]
) -> dict[str, tuple[int, str | None]]:
    """The latest speech line of each session: (its id, its speaker), by session id."""
    m = memory_sessions.c
    top = (
        sa.select(m.session_id, sa.func.max(m.id).label("top"))
        .where(m.log_type == "speech", m.session_id.in_(list(session_ids)))
        .group_by(m.session_id)
        .subquery()
    )
    return {
        str(r.session_id): (int(r.id), r.speaker_id)
        for r in conn.execute(
            sa.select(m.session_id, m.id, m.speaker_id).join(top, m.id == top.c.top)
        )
    }


# ------------------------------------------------------------------ impressions
def save_impression(
    db: Database,
    agent_id: str,
    session_id: str,
    target_id: str,
    values: dict[str, Any],
) -> Impression:
    """Create or update the impression of `target_id` with `values` (columns); returns it."""
    t = impressions.c
    key = (t.agent_id == agent_id, t.session_id == session_id, t.target_id == target_id)
    with db.write() as conn:
        row = conn.execute(sa.select(impressions).where(*key)).first()
        if row is None:
            conn.execute(
                impressions.insert().values(
                    id=str(uuid4()),
                    agent_id=agent_id,
                    session_id=session_id,
                    target_id=target_id,
                    created_at=values["updated_at"],
                    **values,
                )
            )
        else:
            conn.execute(impressions.update().where(*key).values(**values))
        stored = conn.execute(sa.select(impressions).where(*key)).one()
    return _impression(stored)


def session_impressions(db: Database, agent_id: str, session_id: str) -> list[Impression]:
    """The impressions kept in one session, by target name."""
    with db.read() as conn:
        rows = _IMPRESSIONS.rows(conn, agent_id=agent_id, session_id=session_id)
    return [_impression(row) for row in rows]


def all_impressions(db: Database, agent_id: str) -> list[Impression]:
    """Every impression the agent keeps, by target name, newest first for each."""
    with db.read() as conn:
        rows = _ALL_IMPRESSIONS.rows(conn, agent_id=agent_id)
    return [_impression(row) for row in rows]


# ------------------------------------------------------------------ rows to values
def _as_datetime(value: Any) -> datetime:
    """Aggregates (min/max) skip the column type, so SQLite gives back the stored text."""
    return value if isinstance(value, datetime) else parse_timestamp(value)


def _curated(row: Any) -> CuratedMemory:
    return CuratedMemory(
        id=row.id,
        category=row.category,
        content=row.content,
        updated_at=row.updated_at,
        created_at=row.created_at or row.updated_at,
        times_seen=row.times_seen,
    )


def stored_log(row: Any) -> StoredLog:
    """A `memory_sessions` row as a StoredLog (for repositories reading these rows)."""
    return _stored(row)


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
