"""Memory search fusion: recall of lexical, vector and hybrid search, and RRF's k (issue 35).

A generated corpus (bench/memory_corpus.py: facts about made-up people in English and
Japanese, filler lines, a paraphrase and a keyword question per fact, fixed seed) is
written to a fresh SQLite store as one agent's session log, embedded by the real
indexer with the packaged embedder, then every question is asked of each leg alone
(the real lexical search; the real vector index) and of their reciprocal rank fusion
for several values of k. Printed: recall@1, recall@5 and MRR (first 10) per question
kind and language, for lexical, vector and hybrid at each k; the chosen k: the best
overall MRR among those not below lexical on keyword questions (ties: nearest to 60).

    python bench/memory_fusion.py [--people 40] [--filler 400] [--depth 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_corpus import Question, corpus

KS = (1, 5, 10, 20, 40, 60, 100)


def _metrics(ranked: list[list[int]], answers: list[int]) -> tuple[float, float, float]:
    r1 = r5 = mrr = 0.0
    for ids, answer in zip(ranked, answers, strict=True):
        top = ids[:10]
        if answer in top:
            rank = top.index(answer) + 1
            mrr += 1 / rank
            r1 += rank == 1
            r5 += rank <= 5
    n = len(answers) or 1
    return r1 / n, r5 / n, mrr / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=40)
    parser.add_argument("--filler", type=int, default=400)
    parser.add_argument("--depth", type=int, default=30, help="hits each leg hands over")
    args = parser.parse_args()

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.embedding import PACKAGED_NAME, known_embedder
    from opencrab.core.memory import MemoryManager, SessionLog, fuse, search_terms
    from opencrab.core.memory_index import MemoryIndexer
    from opencrab.core.memory_vectors import VECTORS
    from opencrab.store import Database
    from opencrab.store.repositories import memory as memory_repo

    lines, questions = corpus(people=args.people, filler=args.filler)
    with tempfile.TemporaryDirectory(prefix="opencrab-bench-fusion-") as tmp:
        os.environ["OPENCRAB_HOME"] = str(Path(tmp) / "home")
        settings = load_settings(overrides={"data_dir": tmp})
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.upgrade()
        agent = AgentStore(db, settings).create(AgentCreate(name="bench"))
        memory = MemoryManager(db, agent.id)
        session = "11111111-1111-4111-8111-111111111111"
        memory.append_session_logs(
            [SessionLog(session_id=session, log_type="speech", content=t) for t in lines]
        )
        ids = [log.id for batch in memory.log_batches(session) for log in batch]
        started = time.perf_counter()
        MemoryIndexer(db, settings).index_agent(agent.id)
        took = time.perf_counter() - started
        print(f"{len(lines)} lines ({len(questions)} questions), embedded in {took:.1f} s")
        embedder = known_embedder(PACKAGED_NAME)
        assert embedder is not None
        lexical: list[list[int]] = []
        vector: list[list[int]] = []
        for q in questions:
            found = memory_repo.search(db, agent.id, search_terms(q.text), limit=args.depth)
            lexical.append([h.id for h in found])
            query = embedder.embed_query(q.text)
            near = VECTORS.search(db, agent.id, PACKAGED_NAME, query, limit=args.depth)
            vector.append([i for i, _ in near])
        db.close()

    answers = [ids[q.answer] for q in questions]
    groups: dict[str, list[int]] = defaultdict(list)
    for n, q in enumerate(questions):
        groups[f"{q.kind}/{q.language}"].append(n)
        groups[q.kind].append(n)
        groups["all"].append(n)

    def table(name: str, ranked: list[list[int]]) -> dict[str, tuple[float, float, float]]:
        out = {}
        for group, members in sorted(groups.items()):
            out[group] = _metrics([ranked[i] for i in members], [answers[i] for i in members])
        return out

    results = {"lexical": table("lexical", lexical), "vector": table("vector", vector)}
    for k in KS:
        fused = [
            [i for i, _, _ in fuse({"lexical": lex, "vector": vec}, k)]
            for lex, vec in zip(lexical, vector, strict=True)
        ]
        results[f"hybrid k={k}"] = table(f"k={k}", fused)

    group_names = sorted(groups)
    print(f"\n{'':14}" + "".join(f"{g:>24}" for g in group_names))
    print(f"{'':14}" + "".join(f"{'R@1  R@5  MRR':>24}" for _ in group_names))
    for name, by_group in results.items():
        cells = "".join(
            f"{by_group[g][0]:>10.2f}{by_group[g][1]:>5.2f}{by_group[g][2]:>6.2f}   "
            for g in group_names
        )
        print(f"{name:14}{cells}")
    lexical_kw = results["lexical"]["keyword"][2]
    fair = [k for k in KS if results[f"hybrid k={k}"]["keyword"][2] >= lexical_kw - 1e-9]
    best_mrr = max(results[f"hybrid k={k}"]["all"][2] for k in fair or KS)
    tied = [k for k in fair or KS if results[f"hybrid k={k}"]["all"][2] >= best_mrr - 1e-9]
    # among equally good values the one nearest the conventional 60 (Cormack et al.)
    best = min(tied, key=lambda k: abs(k - 60))
    chosen = results[f"hybrid k={best}"]
    lex = results["lexical"]
    if len(tied) == len(KS):
        print("\nevery k ranks alike on this set; the conventional 60 is kept")
    print(
        f"chosen k = {best}: MRR all {chosen['all'][2]:.3f} (lexical {lex['all'][2]:.3f}); "
        f"paraphrase R@5 {chosen['paraphrase'][1]:.2f} vs lexical {lex['paraphrase'][1]:.2f} "
        f"({(chosen['paraphrase'][1] - lex['paraphrase'][1]) * 100:+.0f} points); "
        f"keyword MRR {chosen['keyword'][2]:.3f} vs lexical {lexical_kw:.3f}"
    )


if __name__ == "__main__":
    main()


__all__ = ["Question", "main"]
