"""Imported transcripts' bookkeeping: `import_sessions` (one per file), `import_chunks`
(its lines as read, zstd), `import_problems` (lines that could not be normalized) and
`import_texts` (its message texts, searched with `search_texts`).

An import's events and metrics rows go through the events and metrics repositories,
in the same transaction. Every function runs on the caller's connection.

Example:
    with db.read() as conn:
        found = get(conn, session_id)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypedDict, Unpack

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.bulk import bulk_insert
from opencrab.store.dialects import TextQuery, postgresql, search_import_texts, sqlite
from opencrab.store.prepared import Prepared
from opencrab.store.tables import import_chunks, import_problems, import_sessions, import_texts
from opencrab.store.tables import llm_usage_metrics as metrics


class ImportSession(NamedTuple):
    """One imported file, as stored."""

    id: str
    source: str
    file_path: str
    external_id: str | None
    agent_id: str | None
    title: str | None
    model: str | None
    provider: str | None
    started_at: datetime | None
    ended_at: datetime | None
    lines: int
    bytes: int
    prefix_sha256: str
    file_size: int
    file_mtime: float | None
    messages: int
    problems: int
    kinds_json: dict[str, int]
    calls: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    total_tokens: int
    cost_usd: float
    header_json: dict[str, Any] | None
    last_event_id: str | None
    last_generation_id: str | None
    created_at: datetime
    updated_at: datetime
    project: str | None
    texts_indexed_lines: int


class ImportText(NamedTuple):
    """One message text found by a search, with its session's title."""

    id: int
    session_id: str
    line: int
    role: str
    timestamp: datetime
    text: str
    title: str | None
    source: str


class DayCost(NamedTuple):
    """What imported sessions' model calls cost on one UTC day with one model."""

    day: str
    model: str
    calls: int
    cost_usd: float


_SESSION = tuple(import_sessions.c[name] for name in ImportSession._fields)

COUNTERS = (
    "messages",
    "calls",
    "cost_usd",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)
"""The columns `update` adds to rather than sets."""


_INSERT_SESSION = import_sessions.insert()
_INSERT_CHUNK = import_chunks.insert()


def get(conn: Connection, session_id: str) -> ImportSession | None:
    """An import session, or None."""
    row = conn.execute(_GET, {"session_id": session_id}).first()
    return None if row is None else ImportSession(*row)


def get_many(conn: Connection, session_ids: Sequence[str]) -> dict[str, ImportSession]:
    """The import sessions of those ids that have one, by id (one query)."""
    rows = conn.execute(_GET_MANY, {"session_ids": list(session_ids)})
    return {row[0]: ImportSession(*row) for row in rows}


# built once: an import looks up each file's session and stored texts (the texts' query
# also compiled once; the session's has a Numeric column, which Prepared cannot read)
_GET = sa.select(*_SESSION).where(import_sessions.c.id == sa.bindparam("session_id"))
_GET_MANY = sa.select(*_SESSION).where(
    import_sessions.c.id.in_(sa.bindparam("session_ids", expanding=True))
)
_STORED_TEXTS = Prepared(
    sa.select(import_texts.c.line, import_texts.c.part).where(
        import_texts.c.session_id == sa.bindparam("session_id"),
        import_texts.c.line >= sa.bindparam("line"),
    )
)


class SessionQuery(TypedDict, total=False):
    """Which import sessions `page` finds (each key optional; None: any)."""

    source: str | None
    agent_id: str | None
    day: str | None
    """The UTC day, YYYY-MM-DD, the session started."""
    project: str | None
    model: str | None
    min_cost: float | None
    """Sessions costing at least that many USD."""
    sort: str
    """One of SESSION_ORDERS; "newest" unless given."""
    limit: int
    """100 unless given."""
    offset: int


def _utc_day(conn: Connection, column: Any) -> Any:
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    return dialect.utc_day(column)


def page(conn: Connection, **query: Unpack[SessionQuery]) -> tuple[list[ImportSession], int]:
    """Import sessions in `sort` order (one of SESSION_ORDERS: the most recent first, or by
    cost), and how many match in all."""
    t = import_sessions.c
    where: list[sa.ColumnElement[bool]] = []
    if (source := query.get("source")) is not None:
        where.append(t.source == source)
    if (agent_id := query.get("agent_id")) is not None:
        where.append(t.agent_id == agent_id)
    if (day := query.get("day")) is not None:
        where.append(_utc_day(conn, sa.func.coalesce(t.started_at, t.created_at)) == day)
    if (project := query.get("project")) is not None:
        where.append(t.project == project)
    if (model := query.get("model")) is not None:
        where.append(t.model == model)
    if (min_cost := query.get("min_cost")) is not None:
        where.append(t.cost_usd >= min_cost)
    total = conn.execute(
        sa.select(sa.func.count()).select_from(import_sessions).where(*where)
    ).scalar_one()
    order = _order(query.get("sort", "newest"))
    limit, offset = query.get("limit", 100), query.get("offset", 0)
    rows = conn.execute(
        sa.select(*_SESSION).where(*where).order_by(*order).limit(limit).offset(offset)
    )
    return [ImportSession(*row) for row in rows], int(total)


SESSION_ORDERS = ("newest", "cost_desc", "cost_asc")
"""How `page` can order sessions: newest first, cost high to low, cost low to high."""


def _order(sort: str) -> tuple[sa.ColumnElement[Any], ...]:
    t = import_sessions.c
    newest = sa.func.coalesce(t.started_at, t.created_at).desc()
    if sort == "newest":
        return (newest, t.id)
    if sort == "cost_desc":
        return (t.cost_usd.desc(), newest, t.id)
    if sort == "cost_asc":
        return (t.cost_usd.asc(), newest, t.id)
    raise ValueError(f"unknown session order {sort!r}: use one of {', '.join(SESSION_ORDERS)}")


def facets(conn: Connection) -> dict[str, list[str]]:
    """The values the session list can be filtered by: days (newest first), projects
    and models (sorted)."""
    t = import_sessions.c
    day = _utc_day(conn, sa.func.coalesce(t.started_at, t.created_at))
    days = conn.execute(sa.select(day).distinct().order_by(day.desc())).scalars()
    projects = conn.execute(
        sa.select(t.project).where(t.project.is_not(None)).distinct().order_by(t.project)
    ).scalars()
    models = conn.execute(
        sa.select(t.model).where(t.model.is_not(None)).distinct().order_by(t.model)
    ).scalars()
    return {
        "days": [str(d) for d in days],
        "projects": [str(p) for p in projects],
        "models": [str(m) for m in models],
    }


def cost_by_day_model(conn: Connection) -> list[DayCost]:
    """What imported model calls cost per UTC day and model, oldest day first."""
    m = metrics.c
    day = _utc_day(conn, m.timestamp).label("day")
    rows = conn.execute(
        sa.select(
            day,
            m.model,
            sa.func.count().label("calls"),
            sa.func.coalesce(sa.func.sum(m.estimated_cost_usd), 0.0).label("cost"),
        )
        .where(m.purpose == "import")
        .group_by(day, m.model)
        .order_by(day, m.model)
    )
    return [DayCost(str(r.day), str(r.model), int(r.calls), float(r.cost)) for r in rows]


def create(conn: Connection, values: Mapping[str, Any]) -> None:
    """Store a new import session (column → value)."""
    conn.execute(_INSERT_SESSION, dict(values))  # parameters apart: compiled once


def update(
    conn: Connection, session_id: str, values: Mapping[str, Any], added: Mapping[str, Any]
) -> None:
    """Set `values` and add `added` to the COUNTERS of one import session."""
    t = import_sessions.c
    unknown = set(added) - set(COUNTERS)
    if unknown:
        raise ValueError(f"not counters: {sorted(unknown)}")
    increments = {name: t[name] + amount for name, amount in added.items()}
    conn.execute(import_sessions.update().where(t.id == session_id).values(**values, **increments))


def add_chunk(
    conn: Connection, session_id: str, *, first_line: int, lines: int, raw_bytes: int, data: bytes
) -> None:
    """Store a run of lines as read (`data`: their bytes, compressed)."""
    conn.execute(
        _INSERT_CHUNK,
        {
            "session_id": session_id,
            "first_line": first_line,
            "lines": lines,
            "raw_bytes": raw_bytes,
            "data": data,
        },
    )


def chunks(conn: Connection, session_id: str) -> list[bytes]:
    """An import session's stored chunks (compressed), in line order."""
    rows = conn.execute(
        sa.select(import_chunks.c.data)
        .where(import_chunks.c.session_id == session_id)
        .order_by(import_chunks.c.first_line)
    )
    return [bytes(data) for (data,) in rows]


def replace_problems(
    conn: Connection,
    session_id: str,
    first_line: int,
    problems: Sequence[tuple[int, str]],
    *,
    replace: bool,
) -> int:
    """Store (line, reason) problems; `replace`: first drop those stored from `first_line`
    on. Returns how many problems the session has now."""
    p = import_problems.c
    if replace:
        conn.execute(
            import_problems.delete().where(p.session_id == session_id, p.line >= first_line)
        )
    if problems:
        bulk_insert(
            conn,
            import_problems,
            ("session_id", "line", "reason"),
            [(session_id, line, reason) for line, reason in problems],
        )
    if not replace:
        return len(problems)
    return int(
        conn.execute(sa.select(sa.func.count()).where(p.session_id == session_id)).scalar_one()
    )


def problems(conn: Connection, session_id: str) -> list[tuple[int, str]]:
    """(line, reason) of every problem an import session's lines had, in line order."""
    p = import_problems.c
    rows = conn.execute(
        sa.select(p.line, p.reason).where(p.session_id == session_id).order_by(p.line, p.id)
    )
    return [(int(line), str(reason)) for line, reason in rows]


def refresh_costs(conn: Connection, provider: str, models: Iterable[str]) -> None:
    """Set the cost of every import session with calls of `models` to the sum of its
    import calls' costs (after they were costed again)."""
    m, t = metrics.c, import_sessions.c
    wanted = list(models)
    touched = (
        sa.select(m.session_id)
        .where(m.purpose == "import", m.provider == provider, m.model.in_(wanted))
        .distinct()
    )
    total = (
        sa.select(sa.func.coalesce(sa.func.sum(m.estimated_cost_usd), 0.0))
        .where(m.session_id == t.id, m.purpose == "import")
        .scalar_subquery()
    )
    conn.execute(import_sessions.update().where(t.id.in_(touched)).values(cost_usd=total))


TEXT_COLUMNS = ("session_id", "line", "part", "role", "timestamp", "text")


def add_texts(conn: Connection, rows: Sequence[tuple[Any, ...]], *, bound: bool = False) -> None:
    """Store message texts to search (TEXT_COLUMNS); a (session, line, part) stored
    before is left as it is. `bound`: the rows are in the driver's form already
    (`bulk_insert`'s `bound`)."""
    if not rows:
        return
    stored = {
        (int(line), int(part))
        for line, part in _STORED_TEXTS.rows(
            conn, session_id=rows[0][0], line=min(int(r[1]) for r in rows)
        )
    }
    fresh = [r for r in rows if (int(r[1]), int(r[2])) not in stored]
    if fresh:
        bulk_insert(conn, import_texts, TEXT_COLUMNS, fresh, bound=bound)


def set_texts_indexed(conn: Connection, session_id: str, lines: int) -> None:
    """Record that the texts of a session's first `lines` lines are in import_texts."""
    t = import_sessions.c
    conn.execute(
        import_sessions.update().where(t.id == session_id).values(texts_indexed_lines=lines)
    )


def unindexed(conn: Connection) -> list[ImportSession]:
    """Import sessions with lines whose texts are not in import_texts yet."""
    t = import_sessions.c
    rows = conn.execute(sa.select(*_SESSION).where(t.texts_indexed_lines < t.lines))
    return [ImportSession(*row) for row in rows]


def search_texts(
    conn: Connection, terms: Sequence[str], *, limit: int, offset: int = 0
) -> list[ImportText]:
    """Message texts holding every term (case-insensitive for ASCII), newest first."""
    ids = search_import_texts(conn, TextQuery(tuple(terms), limit=limit, offset=offset))
    if not ids:
        return []
    x, t = import_texts.c, import_sessions.c
    rows = conn.execute(
        sa.select(x.id, x.session_id, x.line, x.role, x.timestamp, x.text, t.title, t.source)
        .join(import_sessions, t.id == x.session_id)
        .where(x.id.in_(ids))
    )
    found = {int(r.id): ImportText(*r) for r in rows}
    return [found[i] for i in ids if i in found]
