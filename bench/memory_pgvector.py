"""Memory search's vector leg on PostgreSQL: pgvector (HNSW, in the database) vs the
in-process numpy index, on the same 100,000 memories in the same run (issue 35).

A throwaway PostgreSQL cluster (tests/fakes/postgres.py; OPENCRAB_TEST_PG_URL when set)
with pgvector (`make postgres` builds it) gets `--memories` session log lines for one
agent: `--sample` distinct generated lines (bench/memory_corpus.py), numbered, over and
over. Their vectors are made from the sample's real embeddings (the packaged
multilingual-e5-small): each a seeded random mix of two of them plus a little noise,
normalised, so no two are equal and they spread where real text sits (copies of a few
vectors would form tight clusters, which an HNSW graph handles worst). They are stored
through the repository's own write path (`save_vectors`): the first 5,000 with the HNSW
index kept up to date as the indexer does (the rate is printed), the rest without it,
and the index is then built at once (`enable_pgvector`, as migration 0042 does; timed).

Then `--queries` questions of the corpus, each embedded once beforehand:
  - pgvector's HNSW at a few `hnsw.ef_search` values, and pgvector without its index
    (exact): time, and how much of the exact top 30 (numpy's) each finds;
  - the vector leg as search runs it (core/memory_vectors.py `nearest`: pgvector, exact
    up to EXACT_UP_TO vectors, HNSW past it) against the in-process numpy index
    (`VectorIndex.search`, its first load of every vector shown apart), alternating;
  - for `--hybrid-queries` of them, the whole search (`MemoryManager.search_detail`:
    lexical leg + query embedding + vector leg + fusion) with each, and the lexical leg
    alone (on PostgreSQL at this size, most of the time).

    python bench/memory_pgvector.py [--memories 100000] [--sample 1000] [--queries 100]
        [--ef 100 200 400] [--hybrid-queries 3]
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

from memory_corpus import corpus, write_numbered

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
    parser.add_argument("--ef", type=int, nargs="*", default=[100, 200, 400, 800])
    parser.add_argument("--hybrid-queries", type=int, default=3)
    args = parser.parse_args()

    import numpy as np
    from tests.fakes.postgres import ENV_URL, postgres_server

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.embedding import PACKAGED_NAME, PackagedEmbedder
    from opencrab.core.memory import MemoryManager, search_terms
    from opencrab.core.memory_vectors import EXACT_UP_TO, VECTORS, VectorIndex, nearest
    from opencrab.store import Database
    from opencrab.store.repositories import memory as memory_repo
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
        write_numbered(memory, session, sample, 0, args.memories)
        print(f"wrote {args.memories} lines in {time.perf_counter() - started:.0f} s")
        started, stored, timed = time.perf_counter(), 0, False
        while True:
            pending = vectors_repo.pending_lines(db, agent.id, PACKAGED_NAME, limit=chunk)
            if not pending:
                break
            # a mix of two of the sample's vectors and a little noise: spread like text
            # (no clusters of near-copies, which an HNSW graph handles worst)
            first = rng.integers(0, len(base), len(pending))
            second = rng.integers(0, len(base), len(pending))
            weight = rng.random((len(pending), 1)).astype(np.float32)
            mixed = weight * base[first] + (1 - weight) * base[second]
            mixed += rng.normal(0, 0.01, mixed.shape).astype(np.float32)
            mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
            rows = [(line.id, mixed[n].astype("<f4").tobytes()) for n, line in enumerate(pending)]
            with db.write() as conn:
                stored += vectors_repo.save_vectors(conn, agent.id, PACKAGED_NAME, rows, 384)
                vectors_repo.set_embedder_state(conn, agent.id, PACKAGED_NAME, dim=384, error=None)
            if not timed:
                # the indexer's way, one batch after another into the HNSW index, timed on
                # the first chunk; then the store goes back to bytes only (as before
                # migration 0042) for the rest, and pgvector is enabled again over all of
                # them: column filled from the bytes, index built at once (0042's cost on
                # a store of this size, timed); one by one would take most of an hour
                took = time.perf_counter() - started
                print(
                    f"stored {stored} vectors (bytes + pgvector column + HNSW index "
                    f"kept up to date) at {stored / took:.0f} vectors/s"
                )
                timed, started = True, time.perf_counter()
                with db.write() as conn:
                    vectors_repo.disable_pgvector(conn)
        took = time.perf_counter() - started
        print(f"stored the other {max(0, stored - chunk)} as bytes in {took:.0f} s")
        started = time.perf_counter()
        with db.write() as conn:
            conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '1GB'")
            assert vectors_repo.enable_pgvector(conn) is None
        print(
            f"enabled pgvector over {stored} stored vectors (column filled, HNSW index "
            f"built) in {time.perf_counter() - started:.0f} s"
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
        exact_of = [
            {i for i, _ in numpy_index.search(db, agent.id, PACKAGED_NAME, q, limit=DEPTH)}
            for q in queries
        ]
        print(f"\nhnsw.ef_search against the exact top {DEPTH} ({len(queries)} questions):")
        for ef in args.ef:
            took_ef: list[float] = []
            held: list[float] = []
            for query, exact_ids in zip(queries, exact_of, strict=True):
                blob = query.astype("<f4").tobytes()
                t0 = time.perf_counter()
                approx = vectors_repo.nearest(
                    db, agent.id, PACKAGED_NAME, blob, limit=DEPTH, ef_search=ef
                )
                took_ef.append(time.perf_counter() - t0)
                held.append(len({i for i, _ in approx} & exact_ids) / len(exact_ids))
            print(
                f"  ef_search {ef:4d}: {_ms(took_ef)}   holds {statistics.mean(held) * 100:5.1f} "
                f"% (worst {min(held) * 100:5.1f} %)"
            )
        took_ef, held = [], []
        for query, exact_ids in zip(queries, exact_of, strict=True):
            t0 = time.perf_counter()
            approx = vectors_repo.nearest(
                db, agent.id, PACKAGED_NAME, query.astype("<f4").tobytes(), limit=DEPTH, exact=True
            )
            took_ef.append(time.perf_counter() - t0)
            held.append(len({i for i, _ in approx} & exact_ids) / len(exact_ids))
        print(
            f"  exact, no index:  {_ms(took_ef)}   holds {statistics.mean(held) * 100:5.1f} "
            f"% (worst {min(held) * 100:5.1f} %)"
        )

        pg_leg: list[float] = []
        np_leg: list[float] = []
        overlap: list[float] = []
        for query, exact_ids in zip(queries, exact_of, strict=True):
            t0 = time.perf_counter()
            approx, _ = nearest(db, agent.id, PACKAGED_NAME, query, limit=DEPTH)
            t1 = time.perf_counter()
            numpy_index.search(db, agent.id, PACKAGED_NAME, query, limit=DEPTH)
            t2 = time.perf_counter()
            pg_leg.append(t1 - t0)
            np_leg.append(t2 - t1)
            overlap.append(len({i for i, _ in approx} & exact_ids) / len(exact_ids))

        # the whole search, a few questions: on PostgreSQL its lexical leg (pg_trgm and
        # bm25 over the agent's lines) is most of the time at this size
        VECTORS.search(db, agent.id, PACKAGED_NAME, queries[0], limit=DEPTH)  # its load
        pg_hybrid: list[float] = []
        np_hybrid: list[float] = []
        lexical: list[float] = []
        for text in asked[: args.hybrid_queries]:
            t0 = time.perf_counter()
            memory_repo.search(db, agent.id, search_terms(text), limit=DEPTH)
            t1 = time.perf_counter()
            found = memory.search_detail(text, limit=10)
            t2 = time.perf_counter()
            assert found.legs == ["lexical", "vector"], found.note
            vectors_repo.set_vector_store(db, in_process)
            try:
                t3 = time.perf_counter()
                found = memory.search_detail(text, limit=10)
                t4 = time.perf_counter()
            finally:
                vectors_repo.set_vector_store(db, store)
            assert found.legs == ["lexical", "vector"], found.note
            lexical.append(t1 - t0)
            pg_hybrid.append(t2 - t1)
            np_hybrid.append(t4 - t3)
        db.close()

    mode = "exact" if args.memories <= EXACT_UP_TO else "HNSW"
    print(f"\nat {args.memories} memories on PostgreSQL 15 + pgvector, {len(asked)} questions:")
    print(f"  vector leg, pgvector ({mode}, as search runs it): {_ms(pg_leg)}")
    print(f"  vector leg, numpy (in process):              {_ms(np_leg)}")
    ratio = statistics.median(np_leg) / statistics.median(pg_leg)
    print(f"  numpy / pgvector (p50):                      {ratio:.2f}x")
    print(
        f"  pgvector's top {DEPTH} holding the exact top {DEPTH}: mean "
        f"{statistics.mean(overlap) * 100:.1f} %, worst {min(overlap) * 100:.1f} %"
    )
    print(f"whole search, {len(pg_hybrid)} questions:")
    print(f"  lexical leg alone:                           {_ms(lexical)}")
    print(f"  hybrid search, pgvector:                     {_ms(pg_hybrid)}")
    print(f"  hybrid search, numpy:                        {_ms(np_hybrid)}")
    ratio = statistics.median(np_hybrid) / statistics.median(pg_hybrid)
    print(f"  numpy / pgvector (p50):                      {ratio:.2f}x")


if __name__ == "__main__":
    main()
