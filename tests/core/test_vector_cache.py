"""The vector leg's per-process matrices stay within their byte budget: the least recently
searched agent's matrix is let go, and read again whole (same answers) when searched."""

from __future__ import annotations

import numpy as np

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_vectors import VectorIndex
from opencrab.store import Database
from opencrab.store.repositories import memory_vectors as repo

MODEL = "test/vectors"
DIM = 8
LINES = 50


def stored(db: Database, settings: Settings, name: str, seed: int) -> str:
    """An agent with LINES log lines, each with a random unit vector; its id."""
    agent = AgentStore(db, settings).create(AgentCreate(name=name))
    MemoryManager(db, agent.id).append_session_logs(
        [
            SessionLog(
                session_id="11111111-1111-4111-8111-111111111111",
                log_type="speech",
                content=f"line {n}",
            )
            for n in range(LINES)
        ]
    )
    rows = np.random.default_rng(seed).standard_normal((LINES, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    pending = repo.pending_lines(db, agent.id, MODEL, limit=LINES)
    with db.write() as conn:
        repo.save_vectors(
            conn,
            agent.id,
            MODEL,
            [(line.id, rows[n].tobytes()) for n, line in enumerate(pending)],
            DIM,
        )
    return agent.id


def test_the_least_recently_searched_matrix_goes_first_and_comes_back_the_same(
    db: Database, settings: Settings
) -> None:
    index = VectorIndex()
    # float32 rows, int64 ids and (with simsimd) the rows' float16 copy
    one_matrix = LINES * (DIM * 4 + 8 + (DIM * 2 if index.half else 0))
    index.max_bytes = 2 * one_matrix
    agents = [stored(db, settings, name, seed) for seed, name in enumerate(("ann", "bo", "cy"))]
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    first = index.search(db, agents[0], MODEL, query, limit=5)
    assert len(first) == 5
    index.search(db, agents[1], MODEL, query, limit=5)
    assert index.nbytes == 2 * one_matrix
    index.search(db, agents[2], MODEL, query, limit=5)  # a third: the first one goes
    assert index.nbytes == 2 * one_matrix
    assert index.held(db, agents[1], MODEL) == LINES
    assert index.held(db, agents[2], MODEL) == LINES
    assert index.held(db, agents[0], MODEL) == 0  # let go (held() keeps it listed, empty)
    assert index.search(db, agents[0], MODEL, query, limit=5) == first  # read again whole
    assert index.held(db, agents[0], MODEL) == LINES
    assert index.nbytes <= 2 * one_matrix


def test_a_matrix_bigger_than_the_budget_is_still_searched(
    db: Database, settings: Settings
) -> None:
    index = VectorIndex(max_bytes=1)
    agent = stored(db, settings, "ann", 7)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    assert len(index.search(db, agent, MODEL, query, limit=3)) == 3
    index.forget(db)
    assert index.nbytes == 0
