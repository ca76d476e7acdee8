"""Memory vectors in PostgreSQL with pgvector (issue 35), on the tests' real PostgreSQL:
the vectors are in a `vector` column with an HNSW index per dimension, and the vector
leg ranks in the database (the statement it sends, its plan, and no matrix in process);
the cat called Tama and its Japanese twin found that way; pgvector's neighbours are the
in-process ones; lines embedded before migration 0042 are filled in by it; a model of
another dimension re-embeds into its own index; and a database where the extension
cannot be created keeps searching in process, says why, and switches to pgvector once a
superuser has created it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.config.models import ModelRef
from opencrab.core import memory_vectors
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.embedding import (
    PACKAGED_NAME,
    PackagedEmbedder,
    forget_embedder,
    remember_embedder,
)
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_index import MemoryIndexer, progress
from opencrab.core.memory_vectors import VECTORS, VectorIndex
from opencrab.store import Database, migrate
from opencrab.store.repositories import memory_vectors as vectors_repo
from tests.fakes.memory_lines import DISTRACTORS, DISTRACTORS_JA, TAMA, TAMA_JA
from tests.fakes.postgres import PostgresServer

S1 = "11111111-1111-4111-8111-111111111111"


@pytest.fixture
def pg(pg_url: str) -> Iterator[Database]:
    db = Database(pg_url)
    db.upgrade()
    yield db
    VECTORS.forget(db)
    db.close()


def _agent(db: Database, settings: Settings, name: str = "a") -> tuple[str, MemoryManager]:
    agent_id = AgentStore(db, settings).create(AgentCreate(name=name)).id
    return agent_id, MemoryManager(db, agent_id)


def _write(memory: MemoryManager, *texts: str) -> None:
    memory.append_session_logs(
        [SessionLog(session_id=S1, log_type="speech", content=t) for t in texts]
    )


@contextmanager
def _statements(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (with their parameters) `db` sends meanwhile."""
    sent: list[tuple[str, Any]] = []

    def _seen(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        sent.append((statement, params))

    sa.event.listen(db.engine, "before_cursor_execute", _seen)
    try:
        yield sent
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", _seen)


def _ranked_in_database(sent: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(s, p) for s, p in sent if "<=>" in s and "memory_embeddings" in s]


def _indexes(db: Database) -> dict[str, str]:
    with db.read() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = "
                "'memory_embeddings' AND indexname LIKE 'ix_memory_embeddings_hnsw_%'"
            )
        ).all()
    return {str(r.indexname): str(r.indexdef) for r in rows}


def _column_type(db: Database) -> str | None:
    with db.read() as conn:
        return conn.execute(
            sa.text(
                "SELECT udt_name FROM information_schema.columns "
                "WHERE table_name = 'memory_embeddings' AND column_name = 'embedding'"
            )
        ).scalar()


def test_vectors_are_a_pgvector_column_ranked_by_its_hnsw_index(
    pg: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, memory = _agent(pg, settings)
    _write(memory, *DISTRACTORS[:2], TAMA, *DISTRACTORS[2:])
    assert MemoryIndexer(pg, settings, batch=4).index_agent(agent_id) == 6
    store = vectors_repo.vector_store(pg)
    assert store.in_database
    assert store.text == "in PostgreSQL (pgvector, HNSW cosine index)"
    assert progress(pg, settings, agent_id).vector_store == store.text
    assert _column_type(pg) == "vector"
    made = _indexes(pg)
    assert list(made) == ["ix_memory_embeddings_hnsw_384"]
    assert "USING hnsw" in made["ix_memory_embeddings_hnsw_384"]
    assert "vector_cosine_ops" in made["ix_memory_embeddings_hnsw_384"]
    assert "WHERE (dim = 384)" in made["ix_memory_embeddings_hnsw_384"]

    with _statements(pg) as sent:
        found = memory.search_detail("what pet does the user have", limit=3)
    assert found.hits[0].content == TAMA
    assert found.hits[0].legs == ["vector"]
    assert "6 lines embedded" in found.note
    ranked = _ranked_in_database(sent)
    assert len(ranked) == 1
    assert "vector(384)" in ranked[0][0]
    # six vectors: every one compared (exact), not the HNSW index
    said = " ".join(statement for statement, _ in sent)
    assert "enable_indexscan" in said
    assert "hnsw.ef_search" not in said
    # nothing was read into a matrix in this process
    assert VECTORS.held(pg, agent_id, PACKAGED_NAME) == 0

    # past EXACT_UP_TO vectors the HNSW index answers, the same
    monkeypatch.setattr(memory_vectors, "EXACT_UP_TO", 5)
    with _statements(pg) as sent:
        again = memory.search_detail("what pet does the user have", limit=3)
    said = " ".join(statement for statement, _ in sent)
    assert "hnsw.ef_search" in said
    assert "hnsw.iterative_scan" in said
    assert "enable_indexscan" not in said
    assert [(h.id, h.legs) for h in again.hits] == [(h.id, h.legs) for h in found.hits]

    # the index serves that very statement (the planner prefers a scan of six rows, so
    # sequential scans are ruled out to see the plan it has for many)
    statement, params = ranked[0]
    with pg.read() as conn:
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + statement, params).all()
        )
    assert "Index Scan using ix_memory_embeddings_hnsw_384" in plan, plan


@pytest.mark.parametrize(
    ("lines", "question", "answer"),
    [
        ([*DISTRACTORS[:2], TAMA, *DISTRACTORS[2:]], "what pet does the user have", TAMA),
        ([*DISTRACTORS_JA[:3], TAMA_JA, *DISTRACTORS_JA[3:]], "ユーザーのペットは？", TAMA_JA),
    ],
    ids=["english", "japanese"],
)
def test_the_cat_called_tama_is_found_through_pgvector(
    pg: Database, settings: Settings, lines: list[str], question: str, answer: str
) -> None:
    agent_id, memory = _agent(pg, settings)
    _write(memory, *lines)
    assert memory.search_detail(question).hits == []  # no word in common
    MemoryIndexer(pg, settings, batch=4).index_agent(agent_id)
    with _statements(pg) as sent:
        found = memory.search_detail(question, limit=3)
    assert _ranked_in_database(sent)
    assert found.legs == ["lexical", "vector"]
    assert found.hits[0].content == answer
    assert found.hits[0].legs == ["vector"]


def test_pgvector_finds_the_neighbours_the_in_process_index_finds(
    pg: Database, settings: Settings
) -> None:
    """300 lines with seeded random unit vectors: pgvector's top 30 (HNSW) are the exact
    in-process ones, in the same order, with the same similarities."""
    agent_id, memory = _agent(pg, settings)
    _write(memory, *[f"line {i}" for i in range(300)])
    pending = vectors_repo.pending_lines(pg, agent_id, PACKAGED_NAME, limit=300)
    rng = np.random.default_rng(35)
    rows = rng.standard_normal((300, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    with pg.write() as conn:
        blobs = [(line.id, rows[i].tobytes()) for i, line in enumerate(pending)]
        assert vectors_repo.save_vectors(conn, agent_id, PACKAGED_NAME, blobs, 384) == 300
    for seed in range(5):
        query = rng.standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        in_db = vectors_repo.nearest(pg, agent_id, PACKAGED_NAME, query.tobytes(), limit=30)
        exact = VectorIndex().search(pg, agent_id, PACKAGED_NAME, query, limit=30)
        assert [i for i, _ in in_db] == [i for i, _ in exact], seed
        assert np.allclose([s for _, s in in_db], [s for _, s in exact], atol=1e-5)
    # another agent's vectors and another model's are never among them
    other_id, _ = _agent(pg, settings, "b")
    assert vectors_repo.nearest(pg, other_id, PACKAGED_NAME, query.tobytes(), limit=30) == []
    assert vectors_repo.nearest(pg, agent_id, "ollama/other", query.tobytes(), limit=30) == []


def test_migration_0042_fills_the_column_from_vectors_stored_before_it(
    pg_url: str, settings: Settings
) -> None:
    db = Database(pg_url)
    try:
        db.upgrade("0041")
        agent_id, memory = _agent(db, settings)
        _write(memory, *DISTRACTORS[:2], TAMA, *DISTRACTORS[2:])
        assert MemoryIndexer(db, settings, batch=4).index_agent(agent_id) == 6
        assert _column_type(db) is None  # bytes only, before 0042

        db.upgrade()
        assert _column_type(db) == "vector"
        assert list(_indexes(db)) == ["ix_memory_embeddings_hnsw_384"]
        with db.read() as conn:
            filled = conn.execute(
                sa.text("SELECT count(*) FROM memory_embeddings WHERE embedding IS NOT NULL")
            ).scalar_one()
            same = conn.execute(
                sa.text("SELECT vector, embedding::text AS text FROM memory_embeddings LIMIT 1")
            ).one()
        assert filled == 6
        # the column holds exactly the stored float32s
        stored = np.frombuffer(bytes(same.vector), dtype="<f4")
        parsed = np.array(same.text.strip("[]").split(","), dtype=np.float32)
        assert np.array_equal(stored, parsed)
        with _statements(db) as sent:
            hit = memory.search("what pet does the user have", limit=1)[0]
        assert _ranked_in_database(sent)
        assert (hit.content, hit.legs) == (TAMA, ["vector"])

        migrate.downgrade(db, "0041")
        assert _column_type(db) is None
        assert _indexes(db) == {}
    finally:
        VECTORS.forget(db)
        db.close()


class _Padded:
    """An embedder of another dimension: the packaged vectors with 16 zeros appended
    (cosine unchanged, so what is tested is the dimension, not a second model)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.inner = PackagedEmbedder()

    def embed_passages(self, texts: Any) -> Any:
        rows = self.inner.embed_passages(texts)
        return np.hstack([rows, np.zeros((rows.shape[0], 16), dtype=np.float32)])

    def embed_query(self, text: str) -> Any:
        return np.concatenate([self.inner.embed_query(text), np.zeros(16, dtype=np.float32)])


def test_a_model_of_another_dimension_re_embeds_into_its_own_index(
    pg: Database, settings: Settings
) -> None:
    agent_id, memory = _agent(pg, settings)
    _write(memory, TAMA, *DISTRACTORS)
    indexer = MemoryIndexer(pg, settings, batch=4)
    indexer.index_agent(agent_id)
    other = _Padded("ollama/padded-embed")
    remember_embedder(other)
    try:
        store = AgentStore(pg, settings)
        config = store.get(agent_id).llm_config
        config.models.embedding = ModelRef(provider="ollama", model="padded-embed")
        store.save_llm_config(agent_id, config)
        assert indexer.index_agent(agent_id, most=4) == 4
        assert progress(pg, settings, agent_id).text == "embedded 4 of 6 with ollama/padded-embed"
        assert indexer.index_agent(agent_id) == 2
        assert vectors_repo.count_embedded(pg, agent_id, PACKAGED_NAME) == 0
        assert set(_indexes(pg)) == {
            "ix_memory_embeddings_hnsw_384",
            "ix_memory_embeddings_hnsw_400",
        }
        with _statements(pg) as sent:
            hit = memory.search("what pet does the user have", limit=1)[0]
        ranked = _ranked_in_database(sent)
        assert ranked
        assert "vector(400)" in ranked[0][0]
        assert (hit.content, hit.legs) == (TAMA, ["vector"])
    finally:
        forget_embedder(other.name)


def test_without_the_extension_vectors_stay_in_process_until_a_superuser_adds_it(
    postgres: PostgresServer, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A database owned by a role that is no superuser: pgvector is installed on the
    server but the role may not create it (it is not a trusted extension)."""
    role = postgres.create_role()
    url = postgres.create_database(owner=role)
    db = Database(url)
    try:
        with caplog.at_level(logging.WARNING):
            db.upgrade()
            store = vectors_repo.vector_store(db)
        assert not store.in_database
        assert store.text.startswith("in process (numpy, exact cosine): ")
        assert "CREATE EXTENSION vector needs a superuser" in store.text
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("could not be created" in m and "permission denied" in m for m in said)
        assert any(m == f"memory vectors are searched {store.text}" for m in said)
        assert _column_type(db) is None

        agent_id, memory = _agent(db, settings)
        _write(memory, *DISTRACTORS[:2], TAMA, *DISTRACTORS[2:])
        MemoryIndexer(db, settings, batch=4).index_agent(agent_id)
        assert progress(db, settings, agent_id).vector_store == store.text
        with _statements(db) as sent:
            hit = memory.search("what pet does the user have", limit=1)[0]
        assert not _ranked_in_database(sent)
        assert (hit.content, hit.legs) == (TAMA, ["vector"])
        assert VECTORS.held(db, agent_id, PACKAGED_NAME) == 6  # the in-process matrix
    finally:
        VECTORS.forget(db)
        db.close()

    admin = postgres.admin_connect(url)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql("CREATE EXTENSION vector")
    finally:
        admin.dispose()
    db = Database(url)  # the next start (cli/common.py: open_store)
    try:
        db.upgrade()
        assert _column_type(db) is None  # (migrations ran before: nothing to migrate)
        assert vectors_repo.use_pgvector_if_installed(db) is None
        assert vectors_repo.vector_store(db).in_database
        assert _column_type(db) == "vector"
        memory = MemoryManager(db, agent_id)
        with _statements(db) as sent:
            hit = memory.search("what pet does the user have", limit=1)[0]
        assert _ranked_in_database(sent)
        assert (hit.content, hit.legs) == (TAMA, ["vector"])
    finally:
        VECTORS.forget(db)
        db.close()
