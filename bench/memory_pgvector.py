"""Memory search's vector leg on PostgreSQL: pgvector (HNSW, in the database) vs the
in-process numpy index, on the same 100,000 memories in the same run (issue 35).

A throwaway PostgreSQL cluster (tests/fakes/postgres.py; OPENCRAB_TEST_PG_URL when set)
with pgvector (`make postgres` builds it) gets `--memories` session log lines for one
agent: `--sample` distinct generated lines (bench/memory_corpus.py), numbered, over and
over. Their vectors are the sample's real embeddings (the packaged multilingual-e5-small)
each moved by a little seeded noise and normalised, so no two are equal (an HNSW graph
of exact duplicates would flatter or punish it) and they sit where real text sits.
They are stored through the repository's own write path (`save_vectors`, which keeps
the HNSW index up to date as it goes); the rate is printed.

Then `--queries` questions of the corpus are asked, each embedded once beforehand, and
timed, alternating:
  - vector leg, pgvector: `nearest` (ORDER BY embedding <=> q LIMIT 30 in PostgreSQL);
  - vector leg, numpy: the in-process index (`VectorIndex.search`) over the same rows,
    its first load (reading 100,000 vectors from PostgreSQL) shown apart;
  - hybrid search (`MemoryManager.search_detail`: lexical leg + query embedding + vector
    leg + fusion) with each path;
and how many of the exact top 30 (numpy) pgvector's approximate top 30 also holds.

    python bench/memory_pgvector.py [--memories 100000] [--sample 1000] [--queries 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_corpus import corpus

DEPTH = 30  # the vector leg's depth in a hybrid search of 10 hits (core/memory.py)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(samples) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    import numpy as np
    from tests.fakes.postgres import ENV_URL, postgres_server

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.embedding import PACKAGED_NAME, PackagedEmbedder
    from opencrab.core.memory import MemoryManager, SessionLog
    from opencrab.core.memory_vectors import VectorIndex
    from opencrab.store import Database
    from opencrab.store.repositories import memory_vectors as vectors_repo

    facts, questions = corpus(people=60, filler=args.sample)
    sample = [f"{text} (#{i})" for i, text in enumerate((facts * 2)[: args.sample])]
    embedder = PackagedEmbedder()
    started = time.perf_counter()
    batches = range(0, len(sample), 64)
    base = np.vstack([embedder.embed_passages(sample[i : i + 64]) for i in batches])
    print(f"embedded the {len(sample)}-line sample in {time.perf_counter() - started:.0f} s")
    rng = np.random.default_rng(35)

    with (
        tempfile.TemporaryDirectory(prefix="opencrab-bench-pgvector-") as tmp,
        postgres_server(os.environ.get(ENV_URL) or None) as server,
    ):
        os.environ["OPENCRAB_HOME"] = str(Path(tmp) / "home")
        settings = load_settings(overrides={"data_dir": tmp})
        db = Database(server.create_database())
        db.upgrade()
        store = vectors_repo.vector_store(db)
        if not store.in_database:
            raise SystemExit(f"this PostgreSQL has no pgvector ({store.text}): make postgres")
        agent = AgentStore(db, settings).create(AgentCreate(name="bench"))
        memory = MemoryManager(db, agent.id)
        session = "11111111-1111-4111-8111-111111111111"

        started = time.perf_counter()
        chunk = 5000
        for start in range(0, args.memories, chunk):
            count = min(chunk, args.memories - start)
            memory.append_session_logs(
                [
                    SessionLog(
                        session_id=session,
                        log_type="speech",
                        content=f"{sample[(start + i) % len(sample)]} [{start + i}]",
                    )
                    for i in range(count)
                ]
            )
        print(f"wrote {args.memories} lines in {time.perf_counter() - started:.0f} s")
        started, stored = time.perf_counter(), 0
        while True:
            pending = vectors_repo.pending_lines(db, agent.id, PACKAGED_NAME, limit=chunk)
            if not pending:
                break
            picks = base[[(stored + n) % len(base) for n in range(len(pending))]]
            noisy = picks + rng.normal(0, 0.02, picks.shape).astype(np.float32)
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            rows = [(line.id, noisy[n].astype("<f4").tobytes()) for n, line in enumerate(pending)]
            with db.write() as conn:
                stored += vectors_repo.save_vectors(conn, agent.id, PACKAGED_NAME, rows, 384)
                vectors_repo.set_embedder_state(conn, agent.id, PACKAGED_NAME, dim=384, error=None)
        took = time.perf_counter() - started
        print(
            f"stored {stored} vectors in PostgreSQL (bytes + pgvector column + HNSW index) "
            f"in {took:.0f} s: {stored / took:.0f} vectors/s"
        )
        with db.write() as conn:
            conn.exec_driver_sql("ANALYZE memory_embeddings")
            conn.exec_driver_sql("ANALYZE memory_sessions")

        asked = [q.text for q in questions][: args.queries]
        queries = [embedder.embed_query(text) for text in asked]
        numpy_index = VectorIndex()
        started = time.perf_counter()
        numpy_index.search(db, agent.id, PACKAGED_NAME, queries[0], limit=DEPTH)
        print(
            f"numpy: first search loads the matrix from PostgreSQL: "
            f"{(time.perf_counter() - started) * 1000:.0f} ms"
        )
        in_process = vectors_repo.VectorStore(False, "in process (numpy): forced for the bench")

        pg_leg: list[float] = []
        np_leg: list[float] = []
        pg_hybrid: list[float] = []
        np_hybrid: list[float] = []
        overlap: list[float] = []
        for text, query in zip(asked, queries, strict=True):
            blob = query.astype("<f4").tobytes()
            t0 = time.perf_counter()
            approx = vectors_repo.nearest(db, agent.id, PACKAGED_NAME, blob, limit=DEPTH)
            t1 = time.perf_counter()
            exact = numpy_index.search(db, agent.id, PACKAGED_NAME, query, limit=DEPTH)
            t2 = time.perf_counter()
            pg_leg.append(t1 - t0)
            np_leg.append(t2 - t1)
            overlap.append(len({i for i, _ in approx} & {i for i, _ in exact}) / len(exact))

            t0 = time.perf_counter()
            found = memory.search_detail(text, limit=10)
            t1 = time.perf_counter()
            assert found.legs == ["lexical", "vector"], found.note
            vectors_repo.set_vector_store(db, in_process)
            try:
                t2 = time.perf_counter()
                found = memory.search_detail(text, limit=10)
                t3 = time.perf_counter()
            finally:
                vectors_repo.set_vector_store(db, store)
            assert found.legs == ["lexical", "vector"], found.note
            pg_hybrid.append(t1 - t0)
            np_hybrid.append(t3 - t2)
        db.close()

    print(f"\nat {args.memories} memories on PostgreSQL 15 + pgvector, {len(asked)} questions:")
    print(f"  vector leg, pgvector (HNSW):         {_ms(pg_leg)}")
    print(f"  vector leg, numpy (in process):      {_ms(np_leg)}")
    ratio = statistics.median(np_leg) / statistics.median(pg_leg)
    print(f"  numpy / pgvector (p50):              {ratio:.2f}x")
    print(f"  hybrid search, pgvector:             {_ms(pg_hybrid)}")
    print(f"  hybrid search, numpy:                {_ms(np_hybrid)}")
    ratio = statistics.median(np_hybrid) / statistics.median(pg_hybrid)
    print(f"  numpy / pgvector (p50):              {ratio:.2f}x")
    print(
        f"  pgvector's top {DEPTH} holding the exact top {DEPTH}: mean "
        f"{statistics.mean(overlap) * 100:.1f} %, worst {min(overlap) * 100:.1f} %"
    )


if __name__ == "__main__":
    main()
