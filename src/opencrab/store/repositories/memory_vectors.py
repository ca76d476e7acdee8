"""The memory vector repository: `memory_embeddings` and `memory_embedders` (issue 35).

The only code that reads and writes them. A vector is stored per session log line and
embedder name as float32 bytes; the embedder an agent's memory is indexed with now, with
the last indexing pass's error, is one `memory_embedders` row.

Where the vector leg searches (`vector_store`):

- PostgreSQL with pgvector (the `vector` extension could be created: migration 0042,
  or any later start once it is installed: `use_pgvector_if_installed`): each row also
  holds its vector in the column `embedding` of type `vector` (no fixed dimension:
  embedders differ, 384 for the packaged one, 768 to 3072 for providers'), and
  `nearest` ranks in the
  database: `ORDER BY embedding::vector(n) <=> query LIMIT k` (cosine distance), served
  by one HNSW index per dimension in use (`ix_memory_embeddings_hnsw_<n>`, an expression
  index on `embedding::vector(n)` over the rows `WHERE dim = n`, made when the first
  vector of that dimension is stored). pgvector's HNSW indexes at most 2,000
  dimensions: a larger embedder's vectors are searched exactly, without index. The
  column is not in `tables.py` (it exists only where the extension does), like the
  trigram index.
- SQLite, or PostgreSQL without pgvector: exact cosine in process, over what
  `vectors_since` returns (core/memory_vectors.py); `vector_store` says why.

The float32 bytes stay the record on both: they need nothing of the database, and the
`embedding` column is filled from them when pgvector arrives later.

Example:
    with db.write() as conn:
        save_vectors(conn, agent_id, "opencrab/multilingual-e5-small", [(log_id, blob)], 384)
    count_embedded(db, agent_id, "opencrab/multilingual-e5-small")
    if vector_store(db).in_database:
        nearest(db, agent_id, "opencrab/multilingual-e5-small", query_blob, limit=30)
"""

from __future__ import annotations

import logging
import threading
import weakref
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store import Database
from opencrab.store.dialects.postgresql import VECTOR_COLUMN, VECTOR_INDEX_PREFIX
from opencrab.store.tables import agents, memory_embedders, memory_embeddings, memory_sessions


@dataclass(frozen=True)
class EmbedderState:
    """The embedder an agent's memory is indexed with, and how the last pass went."""

    agent_id: str
    model: str
    dim: int | None
    error: str | None
    updated_at: datetime


@dataclass(frozen=True)
class VectorStore:
    """Where a database's vector leg searches (see the module docstring)."""

    in_database: bool  # pgvector ranks in PostgreSQL; False: numpy in process
    text: str  # for the log, `opencrab memory index` and the REST route

    def as_json(self) -> dict[str, object]:
        return {"in_database": self.in_database, "text": self.text}


@dataclass(frozen=True)
class PendingLine:
    """A session log line that has no vector of the agent's embedder yet."""

    id: int
    content: str


def agent_ids(db: Database) -> list[str]:
    """Every agent's id (the indexer's round)."""
    with db.read() as conn:
        return [str(r[0]) for r in conn.execute(sa.select(agents.c.id).order_by(agents.c.id))]


def pending_lines(
    db: Database, agent_id: str, model: str, *, after: int = 0, limit: int = 64
) -> list[PendingLine]:
    """Up to `limit` of the agent's lines (id > `after`, oldest first) with no `model`
    vector: new lines, lines written before vectors existed, or all after a model change."""
    m, e = memory_sessions.c, memory_embeddings.c
    has_vector = sa.exists().where(e.log_id == m.id, e.model == model)
    query = (
        sa.select(m.id, m.content)
        .where(m.agent_id == agent_id, m.id > after, ~has_vector)
        .order_by(m.id)
        .limit(limit)
    )
    with db.read() as conn:
        return [PendingLine(int(r.id), str(r.content)) for r in conn.execute(query)]


def save_vectors(
    conn: Connection,
    agent_id: str,
    model: str,
    vectors: Sequence[tuple[int, bytes]],
    dim: int,
) -> int:
    """Store (log id, float32 bytes) vectors of `model` in `conn`'s transaction; a line
    deleted meanwhile or already embedded is skipped. Returns how many were stored."""
    if not vectors:
        return 0
    m, e = memory_sessions.c, memory_embeddings.c
    ids = [log_id for log_id, _ in vectors]
    # by primary key alone (with the agent in the WHERE clause SQLite would walk the
    # agent's index); the agent is checked on the rows found
    live = {
        int(r.id)
        for r in conn.execute(sa.select(m.id, m.agent_id).where(m.id.in_(ids)))
        if r.agent_id == agent_id
    }
    embedded = sa.select(e.log_id).where(e.log_id.in_(ids), e.model == model)
    done = {int(r[0]) for r in conn.execute(embedded)}
    kept = [(log_id, blob) for log_id, blob in vectors if log_id in live and log_id not in done]
    if not kept:
        return 0
    rows: list[dict[str, object]] = [
        {"log_id": log_id, "agent_id": agent_id, "model": model, "dim": dim, "vector": blob}
        for log_id, blob in kept
    ]
    if not _has_column(conn):
        conn.execute(memory_embeddings.insert(), rows)
        return len(rows)
    _ensure_hnsw(conn, dim)
    for row, (_, blob) in zip(rows, kept, strict=True):
        row["embedding"] = vector_text(blob)
    conn.execute(_INSERT_WITH_EMBEDDING, rows)
    return len(rows)


def drop_other_models(conn: Connection, agent_id: str, model: str) -> int:
    """Forget the agent's vectors of every embedder but `model` (after a model change
    has re-embedded everything). Returns how many went."""
    e = memory_embeddings.c
    done = conn.execute(memory_embeddings.delete().where(e.agent_id == agent_id, e.model != model))
    return int(done.rowcount or 0)


def vectors_since(
    db: Database, agent_id: str, model: str, after_seq: int
) -> list[tuple[int, int, bytes]]:
    """The agent's `model` vectors stored after `after_seq`: (seq, log id, bytes), by seq."""
    e = memory_embeddings.c
    query = (
        sa.select(e.seq, e.log_id, e.vector)
        .where(e.agent_id == agent_id, e.model == model, e.seq > after_seq)
        .order_by(e.seq)
    )
    with db.read() as conn:
        return [(int(r.seq), int(r.log_id), bytes(r.vector)) for r in conn.execute(query)]


def count_embedded(db: Database, agent_id: str, model: str) -> int:
    """How many of the agent's lines have a `model` vector."""
    e = memory_embeddings.c
    with db.read() as conn:
        query = sa.select(sa.func.count()).where(e.agent_id == agent_id, e.model == model)
        return int(conn.execute(query).scalar_one())


def count_lines(db: Database, agent_id: str) -> int:
    """How many session log lines the agent has."""
    m = memory_sessions.c
    with db.read() as conn:
        query = sa.select(sa.func.count()).where(m.agent_id == agent_id)
        return int(conn.execute(query).scalar_one())


def lines_matching(
    db: Database,
    agent_id: str,
    session_id: str | None,
    log_types: Sequence[str],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> set[int]:
    """The ids of the agent's lines in `session_id`, of `log_types` and written in
    [since, until) (each when given)."""
    m = memory_sessions.c
    query = sa.select(m.id).where(m.agent_id == agent_id)
    if since is not None:
        query = query.where(m.created_at >= since)
    if until is not None:
        query = query.where(m.created_at < until)
    if session_id is not None:
        query = query.where(m.session_id == session_id)
    if log_types:
        query = query.where(m.log_type.in_(list(log_types)))
    with db.read() as conn:
        return {int(r[0]) for r in conn.execute(query)}


def embedder_state(db: Database, agent_id: str) -> EmbedderState | None:
    """The agent's `memory_embedders` row, None before the indexer first saw the agent."""
    with db.read() as conn:
        row = conn.execute(
            sa.select(memory_embedders).where(memory_embedders.c.agent_id == agent_id)
        ).first()
    if row is None:
        return None
    return EmbedderState(
        agent_id=str(row.agent_id),
        model=str(row.model),
        dim=row.dim,
        error=row.error,
        updated_at=row.updated_at,
    )


def set_embedder_state(
    conn: Connection, agent_id: str, model: str, *, dim: int | None, error: str | None
) -> None:
    """Write the agent's embedder, its dimension (None: not known yet) and the last error."""
    values = {"model": model, "dim": dim, "error": error, "updated_at": datetime.now(UTC)}
    c = memory_embedders.c
    done = conn.execute(memory_embedders.update().where(c.agent_id == agent_id).values(values))
    if not done.rowcount:
        conn.execute(memory_embedders.insert().values(agent_id=agent_id, **values))


# ---------------------------------------------------------------- pgvector (PostgreSQL)

log = logging.getLogger(__name__)

COLUMN = VECTOR_COLUMN  # "embedding"
HNSW_PREFIX = VECTOR_INDEX_PREFIX  # + str(dim): an HNSW index per dimension

HNSW_MAX_DIM = 2000
"""The most dimensions pgvector's HNSW indexes for the `vector` type."""

EF_SEARCH_MIN = 400
"""hnsw.ef_search for a search (at least twice the rows asked for): the candidate list
HNSW keeps. bench/memory_pgvector.py, at 100,000 vectors, top 30: 100 held 88 % of the
exact answer (and for some queries none of it), 200 held 95 %, 400 held 98.6 %, 800
99.8 % in twice 400's time; at 400 the vector leg stays faster than the in-process one."""

MISSING = (
    "pgvector is not installed on this PostgreSQL server (Debian: build it from source, "
    "see `make postgres`; other systems: the postgresql-NN-pgvector package), then restart"
)

_INSERT_WITH_EMBEDDING = sa.text(
    "INSERT INTO memory_embeddings (log_id, agent_id, model, dim, vector, embedding) "
    "VALUES (:log_id, :agent_id, :model, :dim, :vector, CAST(:embedding AS vector))"
)

_STORES: weakref.WeakKeyDictionary[Database, VectorStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def vector_text(blob: bytes) -> str:
    """pgvector's text form of float32 little-endian bytes ('[0.25,-1.5,…]'), exact: each
    float32 read back from it is the same float32."""
    values = array("f", blob)
    return "[" + ",".join(map(repr, values.tolist())) + "]"


def _has_column(conn: Connection) -> bool:
    if conn.dialect.name != "postgresql":
        return False
    found = conn.execute(
        sa.text(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'memory_embeddings' AND column_name = :c"
        ),
        {"c": COLUMN},
    ).first()
    return found is not None


def _ensure_hnsw(conn: Connection, dim: int) -> None:
    """The HNSW index of `dim`-dimension vectors, made when missing (none past
    HNSW_MAX_DIM: those are searched exactly)."""
    dim = int(dim)
    if not 0 < dim <= HNSW_MAX_DIM:
        return
    name = f"{HNSW_PREFIX}{dim}"
    if conn.execute(sa.text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None:
        return  # (CREATE INDEX IF NOT EXISTS would lock the table to find out)
    conn.execute(
        sa.text(
            f"CREATE INDEX IF NOT EXISTS {HNSW_PREFIX}{dim} ON memory_embeddings "
            f"USING hnsw (({COLUMN}::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
        )
    )


def enable_pgvector(conn: Connection) -> str | None:
    """Use pgvector for `conn`'s database when its server has it: create the extension,
    add the `embedding` column, fill it from the stored bytes and index each dimension.
    None when pgvector is in use, else why not (nothing changed then). Idempotent and
    quick once done (it fills only rows still without `embedding`)."""
    if conn.dialect.name != "postgresql":
        return "SQLite has no pgvector"
    if not _has_column(conn):
        available = conn.execute(
            sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        ).first()
        if available is None:
            return MISSING
        try:
            with conn.begin_nested():
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        except sa.exc.DBAPIError as exc:
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
            return (
                f"the extension vector could not be created ({reason}); a superuser can "
                "run CREATE EXTENSION vector in this database, then restart"
            )
        conn.execute(
            sa.text(f"ALTER TABLE memory_embeddings ADD COLUMN IF NOT EXISTS {COLUMN} vector")
        )
    while True:  # fill the rows stored before (or by a process that did not know)
        rows = conn.execute(
            sa.text(
                f"SELECT seq, vector FROM memory_embeddings WHERE {COLUMN} IS NULL "
                "ORDER BY seq LIMIT 2000"
            )
        ).all()
        if not rows:
            break
        conn.execute(
            sa.text(f"UPDATE memory_embeddings SET {COLUMN} = CAST(:v AS vector) WHERE seq = :s"),
            [{"s": int(r.seq), "v": vector_text(bytes(r.vector))} for r in rows],
        )
    for (dim,) in conn.execute(sa.text("SELECT DISTINCT dim FROM memory_embeddings")).all():
        _ensure_hnsw(conn, int(dim))
    return None


def use_pgvector_if_installed(db: Database) -> str | None:
    """`enable_pgvector` on a migrated PostgreSQL store (start-up and `opencrab db
    upgrade` call it: pgvector installed after migration 0042 ran is used from the next
    start). None when pgvector is in use, else why not; SQLite: nothing is done."""
    if db.dialect != "postgresql" or db.read_only:
        return "SQLite has no pgvector" if db.dialect == "sqlite" else "read-only"
    with db.write() as conn:
        return enable_pgvector(conn)


def disable_pgvector(conn: Connection) -> None:
    """Undo `enable_pgvector` (the indexes and the column; the extension stays: other
    objects may use it). Nothing to do without the column."""
    if not _has_column(conn):
        return
    names = conn.execute(
        sa.text(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'memory_embeddings' AND indexname LIKE :p"
        ),
        {"p": HNSW_PREFIX + "%"},
    ).scalars()
    for name in list(names):
        conn.execute(sa.text(f'DROP INDEX IF EXISTS "{name}"'))
    conn.execute(sa.text(f"ALTER TABLE memory_embeddings DROP COLUMN {COLUMN}"))


def vector_store(db: Database) -> VectorStore:
    """Where `db`'s vector leg searches, found once per Database (a PostgreSQL without
    pgvector is logged once as a warning, with what to do)."""
    with _STORES_LOCK:
        known = _STORES.get(db)
    if known is not None:
        return known
    if db.dialect == "sqlite":
        found = VectorStore(False, "in process (numpy, exact cosine): SQLite")
    else:
        with db.read() as conn:
            has = _has_column(conn)
            reason = None
            if not has:
                available = conn.execute(
                    sa.text(
                        "SELECT installed_version FROM pg_available_extensions "
                        "WHERE name = 'vector'"
                    )
                ).first()
                reason = (
                    MISSING
                    if available is None
                    else "pgvector is installed on the server but not in use in this "
                    "database (CREATE EXTENSION vector needs a superuser), then restart"
                )
        if has:
            found = VectorStore(True, "in PostgreSQL (pgvector, HNSW cosine index)")
        else:
            found = VectorStore(False, f"in process (numpy, exact cosine): {reason}")
            log.warning("memory vectors are searched %s", found.text)
    with _STORES_LOCK:
        _STORES[db] = found
    return found


def set_vector_store(db: Database, store: VectorStore) -> None:
    """Make `db`'s vector leg search where `store` says (bench/memory_pgvector.py times
    both paths on one database; nothing else calls this)."""
    with _STORES_LOCK:
        _STORES[db] = store


def nearest(
    db: Database,
    agent_id: str,
    model: str,
    query: bytes,
    *,
    limit: int,
    session_id: str | None = None,
    log_types: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    ef_search: int | None = None,
    exact: bool = False,
) -> list[tuple[int, float]]:
    """The `limit` lines of the agent whose `model` vectors are nearest to `query`
    (float32 bytes, unit length) by cosine, best first, as (log id, similarity), ranked
    by pgvector in PostgreSQL (`vector_store(db).in_database`); within the session, log
    types and [since, until) when given. Vectors of another dimension are not compared.
    `ef_search`: HNSW's candidate list (default: EF_SEARCH_MIN, or twice `limit`);
    `exact`: no HNSW, every vector of the agent compared (still in the database)."""
    dim = len(query) // 4
    if dim < 1 or limit < 1:
        return []
    cast = f"{COLUMN}::vector({dim})"
    joins, where = "", ["e.agent_id = :agent_id", "e.model = :model", f"e.dim = {dim}"]
    params: dict[str, object] = {
        "agent_id": agent_id,
        "model": model,
        "q": vector_text(query),
        "limit": int(limit),
    }
    lines = {"session_id": session_id, "since": since, "until": until}
    if log_types or any(value is not None for value in lines.values()):
        joins = " JOIN memory_sessions m ON m.id = e.log_id"
        if session_id is not None:
            where.append("m.session_id = :session_id")
        if since is not None:
            where.append("m.created_at >= :since")
        if until is not None:
            where.append("m.created_at < :until")
        if log_types:
            where.append("m.log_type IN :log_types")
        params.update({k: v for k, v in lines.items() if v is not None})
    statement = sa.text(
        f"SELECT e.log_id, e.{cast} <=> CAST(:q AS vector({dim})) AS distance "
        f"FROM memory_embeddings e{joins} WHERE {' AND '.join(where)} "
        "ORDER BY distance LIMIT :limit"
    )
    if log_types:
        params["log_types"] = list(log_types)
        statement = statement.bindparams(sa.bindparam("log_types", expanding=True))
    ef = str(min(1000, ef_search or max(EF_SEARCH_MIN, 2 * int(limit))))
    with db.read() as conn:
        # more candidates than asked for, and iterative scans: the agent and model
        # filters are applied to what the index finds, so it goes on until `limit` pass
        if exact:  # HNSW is an index scan; the agent's rows come by bitmap or seq scan
            conn.execute(sa.text("SELECT set_config('enable_indexscan', 'off', true)"))
        else:
            conn.execute(sa.text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": ef})
            conn.execute(sa.text("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)"))
        rows = conn.execute(statement, params).all()
    return [(int(r.log_id), 1.0 - float(r.distance)) for r in rows]
