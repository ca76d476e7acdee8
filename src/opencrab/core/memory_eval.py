"""How well an agent's memory search finds things, measured on the agent's own memory
(`opencrab memory eval`, the dashboard's memory page, `GET /api/agents/{id}/memory/evals`).

A question set is built from the agent's own log lines (what it said, thought and noted,
imported transcripts' lines included; the latest POOL_LINES of 8+ characters, `questions` of
them drawn with a fixed seed): each question's answer is its line (or any line with the
same text). The questions come from

- the agent's analysis model, when one is configured (`generator="model"`, or `"auto"`,
  which uses the built-in generator when no provider is configured, only the embedded
  offline stand-in, or when the call fails, e.g. a refused key): a question a
  person might ask later, in other words where the model finds them; its cost is a
  metrics row (purpose analysis, task memory_eval);
- the built-in generator otherwise (`"builtin"`, no key needed, deterministic): the
  line's two or three rarest words among the pool (English words of 3+ letters that are
  no question words; for Japanese and Chinese, 3-character pieces with at most one
  kana), in shuffled order: the keywords someone remembering the line would type.

Each search leg answers every question (`k` = 10) and is scored: recall@1, @5, @10 (the
share of questions whose line is in the first 1, 5, 10 hits), MRR (the mean of 1/rank of
the first right hit, 0 when it is not in the ten), and its latency per question (p50 and
mean, in ms, the leg's own call). A leg is a callable (memory, query, k) -> ranked line
ids, registered by name (`register_leg`). Built in are the retrieval's own paths
(MemoryManager.search_detail): `lexical` (full text alone), `vector` (the stored vectors
alone) and `hybrid` (both fused by reciprocal rank, what the agent's search answers);
`vector` and `hybrid` say they are not available, and why, when the agent's memory has
no vectors yet or its embedder cannot run in this process, rather than showing a figure.
Each run is stored (`memory_eval_runs`), so runs over time show the effect of a change.

Example:
    run = await evaluate(db, agent, questions=50, seed=7, router=None)   # built-in questions
    run.legs["lexical"]["recall@5"], run.legs["vector"]["available"]
"""

from __future__ import annotations

import json
import logging
import random
import re
import statistics
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from opencrab.core.memory import QUESTION_WORDS, MemoryManager, StoredLog, normalised
from opencrab.errors import LlmError, OpenCrabError, ValidationError
from opencrab.llm.router import EMBEDDED, CallInfo
from opencrab.llm.types import ChatRequest, Message
from opencrab.offload import run_blocking
from opencrab.prompts import prompts
from opencrab.store import Database
from opencrab.store.repositories import memory_evals as repo
from opencrab.store.repositories.memory_evals import EvalRun

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.llm.router import LlmRouter

log = logging.getLogger(__name__)

SearchLeg = Callable[[MemoryManager, str, int], Sequence[int]]
"""A search leg: (the agent's memory, a query, k) -> the ids of its best k lines, best first."""

Generator = Literal["auto", "builtin", "model"]
KNOWN_LEGS = ("lexical", "vector", "hybrid")  # shown even when an install lacks one
K = 10
POOL_LINES = 3000
MODEL_BATCH = 8
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
KANA = re.compile(r"[\u3040-\u309f]")  # hiragana: particles and endings, not keywords
LATIN = re.compile(r"[A-Za-z\u00c0-\u024f][A-Za-z0-9\u00c0-\u024f'-]{2,}")
COMMON = QUESTION_WORDS | frozenset(
    [
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "have",
        "has",
        "had",
        "will",
        "would",
        "could",
        "should",
        "can",
        "not",
        "but",
        "or",
        "so",
        "if",
        "then",
        "than",
        "just",
        "also",
        "very",
        "really",
        "from",
        "into",
        "out",
        "up",
        "down",
        "over",
        "about",
        "yes",
        "no",
        "okay",
        "ok",
        "let",
        "lets",
        "let's",
        "get",
        "got",
        "make",
        "made",
        "like",
        "one",
        "two",
    ]
)

Availability = Callable[[MemoryManager], str | None]
"""Why a leg cannot run on an agent's memory here (None: it can)."""

_LEGS: dict[str, SearchLeg] = {}
_AVAILABLE: dict[str, Availability] = {}


def register_leg(name: str, leg: SearchLeg, *, unavailable: Availability | None = None) -> None:
    """Make a search leg known to the eval by name (`vector`, `hybrid`, or another);
    `unavailable(memory)`, when given, says why the leg cannot run on an agent's memory
    (the run then shows that reason instead of a figure)."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name):
        raise ValidationError(f"search leg name {name!r}: lowercase letters, digits, - and _")
    _LEGS[name] = leg
    if unavailable is None:
        _AVAILABLE.pop(name, None)
    else:
        _AVAILABLE[name] = unavailable


def legs() -> dict[str, SearchLeg]:
    """The registered search legs by name."""
    return dict(_LEGS)


def lexical_leg(memory: MemoryManager, query: str, k: int) -> list[int]:
    """The full-text leg alone (FTS5 / pg_trgm, bm25; within a time the query names)."""
    return [hit.id for hit in memory.search_detail(query, limit=k, mode="lexical").hits]


def vector_leg(memory: MemoryManager, query: str, k: int) -> list[int]:
    """The meaning leg alone: the lines whose stored vectors are nearest the query's."""
    return [hit.id for hit in memory.search_detail(query, limit=k, mode="vector").hits]


def hybrid_leg(memory: MemoryManager, query: str, k: int) -> list[int]:
    """What the agent's search answers: both legs fused by reciprocal rank."""
    return [hit.id for hit in memory.search_detail(query, limit=k).hits]


def no_vectors(memory: MemoryManager) -> str | None:
    """Why `memory` has no vector leg here: no vectors yet, or its embedder cannot run."""
    return memory.vector_unavailable()


register_leg("lexical", lexical_leg)
register_leg("vector", vector_leg, unavailable=no_vectors)
register_leg("hybrid", hybrid_leg, unavailable=no_vectors)


@dataclass(frozen=True)
class Question:
    """One question of the set: its text, its line, and every line that answers it."""

    query: str
    line_id: int
    relevant: frozenset[int]
    kind: str  # keywords (built-in) or paraphrase (the analysis model)


# ------------------------------------------------------------------ the built-in generator
def candidates(text: str) -> list[str]:
    """The keywords a line offers, in order: English words of 3+ letters that are no
    common words; 3-character CJK pieces with at most one kana (each once)."""
    text = unicodedata.normalize("NFKC", text)
    found: list[str] = []
    for word in LATIN.findall(text):
        word = word.lower().strip("'-")
        if len(word) >= 3 and word not in COMMON and word not in found:
            found.append(word)
    for run in CJK.findall(text):
        for i in range(len(run) - 2):
            piece = run[i : i + 3]
            if len(KANA.findall(piece)) <= 1 and piece not in found:
                found.append(piece)
    return found


def keyword_question(
    line: StoredLog, frequency: Callable[[str], int], rng: random.Random
) -> str | None:
    """The built-in question for `line`: its 2-3 rarest keywords (one if it has only
    one), shuffled; None when it has none."""
    words = candidates(line.content)
    if not words:
        return None
    ranked = sorted(words, key=lambda w: (frequency(w), rng.random()))
    chosen = ranked[: 3 if len(ranked) >= 6 else 2]
    rng.shuffle(chosen)
    return " ".join(chosen)


class Frequencies:
    """How many pool lines hold a keyword (case-insensitive), counted once per keyword."""

    def __init__(self, pool: Sequence[StoredLog]) -> None:
        self.texts = [unicodedata.normalize("NFKC", line.content).lower() for line in pool]
        self.counts: dict[str, int] = {}

    def __call__(self, word: str) -> int:
        if word not in self.counts:
            self.counts[word] = sum(word in text for text in self.texts)
        return self.counts[word]


def pick_lines(pool: Sequence[StoredLog], n: int, seed: int) -> list[StoredLog]:
    """`n` lines of the pool drawn with `seed`, one per distinct text, in pool order."""
    seen: set[str] = set()
    distinct = []
    for line in pool:
        key = normalised(line.content)
        if key and key not in seen:
            seen.add(key)
            distinct.append(line)
    rng = random.Random(seed)
    chosen = rng.sample(distinct, min(n, len(distinct)))
    return sorted(chosen, key=lambda line: line.id)


def answers(pool: Sequence[StoredLog]) -> dict[str, frozenset[int]]:
    """The ids of the pool's lines by normalised text: every line that answers a question."""
    by_text: dict[str, set[int]] = {}
    for line in pool:
        by_text.setdefault(normalised(line.content), set()).add(line.id)
    return {text: frozenset(ids) for text, ids in by_text.items()}


def builtin_questions(
    pool: Sequence[StoredLog], lines: Sequence[StoredLog], seed: int
) -> list[Question]:
    """The built-in question of each line that has one (see the module docstring)."""
    rng = random.Random(seed + 1)
    frequency = Frequencies(pool)
    same = answers(pool)
    questions = []
    for line in lines:
        query = keyword_question(line, frequency, rng)
        if query is not None:
            relevant = same.get(normalised(line.content), frozenset()) | {line.id}
            questions.append(Question(query, line.id, frozenset(relevant), "keywords"))
    return questions


# ------------------------------------------------------------------ the model's questions
async def model_questions(
    router: LlmRouter,
    agent: Agent,
    pool: Sequence[StoredLog],
    lines: Sequence[StoredLog],
    model: str,
) -> list[Question]:
    """A question for each line from the agent's analysis model (batches of MODEL_BATCH);
    raises LlmError when a call fails, so the caller may fall back."""
    texts = prompts(agent.language)
    same = answers(pool)
    questions: list[Question] = []
    for start in range(0, len(lines), MODEL_BATCH):
        batch = lines[start : start + MODEL_BATCH]
        numbered = "\n".join(f"{i + 1}. {line.content[:400]}" for i, line in enumerate(batch))
        request = ChatRequest(
            model=model,
            messages=[
                Message.system(texts.render("eval_questions_system")),
                Message.user(texts.render("eval_questions_user", lines=numbered)),
            ],
            max_tokens=120 * len(batch),
        )
        info = CallInfo(purpose="analysis", task_type="memory_eval", agent_id=agent.id)
        reply = await router.chat(request, info)
        asked = _questions(reply.text)
        for line, query in zip(batch, asked, strict=False):
            query = query.strip()[:500] if isinstance(query, str) else ""
            if query:
                relevant = same.get(normalised(line.content), frozenset()) | {line.id}
                questions.append(Question(query, line.id, frozenset(relevant), "paraphrase"))
    return questions


def model_configured(router: LlmRouter, model: str) -> bool:
    """Whether the agent's analysis model is a configured provider's (not the small
    embedded stand-in the router answers with when no provider is configured)."""
    target = router.resolve(model or None, "analysis")
    usable = router.usable
    return target.provider != EMBEDDED and (usable is None or target.provider in usable)


def _questions(text: str) -> list[Any]:
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        found = value.get("questions") if isinstance(value, dict) else None
        return found if isinstance(found, list) else []
    return []


# ------------------------------------------------------------------ scoring
def score(
    memory: MemoryManager, leg: SearchLeg, questions: Sequence[Question], k: int = K
) -> dict[str, Any]:
    """One leg's figures over the questions (blocking: each question is a search)."""
    ranks: list[int | None] = []
    took: list[float] = []
    errors = 0
    for question in questions:
        started = time.perf_counter()
        try:
            ranked = list(leg(memory, question.query, k))[:k]
        except OpenCrabError:
            ranked = []  # a query the leg refuses finds nothing
            errors += 1
        took.append((time.perf_counter() - started) * 1000)
        rank = next((i + 1 for i, rid in enumerate(ranked) if rid in question.relevant), None)
        ranks.append(rank)
    n = len(questions) or 1

    def recall(at: int) -> float:
        return round(sum(1 for r in ranks if r is not None and r <= at) / n, 4)

    return {
        "available": True,
        "recall@1": recall(1),
        "recall@5": recall(5),
        "recall@10": recall(10),
        "mrr": round(sum(1 / r for r in ranks if r is not None) / n, 4),
        "p50_ms": round(statistics.median(took), 3) if took else 0.0,
        "mean_ms": round(statistics.fmean(took), 3) if took else 0.0,
        "errors": errors,
    }


def unavailable(name: str, why: str | None = None) -> dict[str, Any]:
    return {"available": False, "note": why or f"no {name} search leg in this install"}


async def evaluate(
    db: Database,
    agent: Agent,
    *,
    questions: int = 50,
    seed: int = 7,
    generator: Generator = "auto",
    router: LlmRouter | None = None,
    model: str = "",
    store: bool = True,
) -> EvalRun:
    """Build the question set from the agent's memory, score every leg, store the run
    (see the module docstring). `router` and `model` (the agent's analysis model) make
    the model's questions possible; without a router only the built-in generator runs.
    Raises ValidationError when the agent has no line to ask about."""
    if not 1 <= questions <= 1000:
        raise ValidationError("questions must be 1 to 1000")
    memory = MemoryManager(db, agent.id)
    pool = await run_blocking(repo.eval_pool, db, agent.id, limit=POOL_LINES)
    lines = pick_lines(pool, questions, seed)
    if not lines:
        raise ValidationError(
            f"agent {agent.name!r} has no memory lines to ask about yet (it needs lines "
            "of 8 characters or more: chat with it, or import transcripts)"
        )
    used = "builtin"
    asked: list[Question] = []
    if generator == "auto" and router is not None and not model_configured(router, model):
        router = None  # only the offline stand-in would answer: the built-in questions
    if generator != "builtin":
        if router is None:
            if generator == "model":
                raise ValidationError("the model's questions need the agent's analysis model")
        else:
            try:
                asked = await model_questions(router, agent, pool, lines, model)
                used = "model"
            except LlmError as exc:
                if generator == "model":
                    raise
                log.info("memory eval: the analysis model gave no questions (%s)", exc)
    if not asked:
        used = "builtin"
        asked = builtin_questions(pool, lines, seed)
    if not asked:
        raise ValidationError(f"agent {agent.name!r} has no line with keywords to ask about")
    registered = legs()
    figures: dict[str, dict[str, Any]] = {}
    for name in [*KNOWN_LEGS, *sorted(set(registered) - set(KNOWN_LEGS))]:
        leg = registered.get(name)
        check = _AVAILABLE.get(name)
        why = None if leg is None or check is None else await run_blocking(check, memory)
        if leg is None or why is not None:
            figures[name] = unavailable(name, why)
        else:
            figures[name] = await run_blocking(score, memory, leg, asked)
    if not store:
        return EvalRun(
            id="",
            agent_id=agent.id,
            questions=len(asked),
            generator=used,
            legs=figures,
            created_at=datetime.now(UTC),
        )
    return await run_blocking(
        repo.add_run, db, agent.id, questions=len(asked), generator=used, legs=figures
    )


def runs(db: Database, agent_id: str, *, limit: int = 50) -> list[EvalRun]:
    """The agent's stored runs, newest first."""
    return repo.runs(db, agent_id, limit=limit)


__all__ = [
    "KNOWN_LEGS",
    "EvalRun",
    "Question",
    "SearchLeg",
    "builtin_questions",
    "candidates",
    "evaluate",
    "hybrid_leg",
    "legs",
    "lexical_leg",
    "register_leg",
    "runs",
    "score",
    "vector_leg",
]
