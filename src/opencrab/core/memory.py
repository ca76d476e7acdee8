"""MemoryManager (seed 001 "Memory"): what an agent keeps between turns.

Three stores, all keyed by the agent, kept by `opencrab.store.repositories.memory`:

- curated memory (`memory_curated`): facts the agent or its operator chose to keep, by
  category ("core" is always in the prompt);
- session logs (`memory_sessions`): every speech, inner voice, action and system note,
  searchable in any language on either database (SQLite: FTS5 with the trigram
  tokenizer; PostgreSQL: pg_trgm): words of 3+ characters rank with bm25, shorter ones
  (which trigrams cannot index) filter; query text is never query syntax; and by
  meaning: a background indexer (core/memory_index.py) stores a vector per line, and
  `search_detail` fuses both legs by reciprocal rank (hybrid search);
- impressions (`impressions`): what the agent thinks of others in a session, one row
  per session and target, updated field by field.

A curated memory that says the same as one the agent keeps in that category (the same
text once normalised, or character trigrams nearly all shared: `says_the_same`) is
merged into the older one (`remember`): its id and first time kept, its time updated and
its count (`times_seen`) up, never a second copy. Every log line has its time
(`created_at`), and every hit keeps it; a search naming a time ("what did we decide last
Tuesday", 先週の火曜日, 昨日, 3日前: core/memory_time.py) searches the lines of that span
first, in both legs (`search_detail`, also called `search_in_time`).

Example:
    memory = MemoryManager(db, agent_id)
    memory.append_session_log(SessionLog(session_id=s, log_type="speech", content="東京の話"))
    [hit.content for hit in memory.search("東京")]
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy.engine import Connection

from opencrab.core.embedding import EmbedderUnavailable, known_embedder, query_vector
from opencrab.core.memory_time import TimeWindow, time_window
from opencrab.core.memory_vectors import LineFilter, nearest
from opencrab.errors import ValidationError
from opencrab.prompts import Language, prompts
from opencrab.store import Database
from opencrab.store.repositories import memory as repo
from opencrab.store.repositories import memory_vectors as vectors_repo
from opencrab.store.repositories.memory import (
    LOG_COLUMNS,
    LOG_TYPES,
    CuratedMemory,
    Impression,
    LogType,
    SearchResult,
    SessionLog,
    SessionSummary,
    StoredLog,
    index_pending,
)

__all__ = [
    "CONTEXT_CATEGORIES",
    "LOG_COLUMNS",
    "LOG_TYPES",
    "MAX_CONTEXT_CHARS",
    "CuratedMemory",
    "Impression",
    "LogType",
    "MemoryManager",
    "MemorySearch",
    "SearchResult",
    "SessionLog",
    "SessionSummary",
    "StoredLog",
    "index_pending",
    "says_the_same",
    "search_terms",
]

CONTEXT_CATEGORIES = ("core",)  # categories always put in the prompt, in this order
MAX_CONTEXT_CHARS = 4000
MAX_QUERY_CHARS = 1000
SAME_TRIGRAMS = 0.8
"""Two memories whose normalised texts share this much of their character trigrams
(Jaccard) say the same."""
# words a question about time asks with, which no remembered line needs to contain
QUESTION_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "on",
        "in",
        "at",
        "to",
        "for",
        "with",
        "about",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "did",
        "do",
        "does",
        "was",
        "were",
        "is",
        "are",
        "we",
        "i",
        "you",
        "he",
        "she",
        "they",
        "it",
        "our",
        "my",
        "your",
        "their",
        "me",
        "us",
        "them",
        "tell",
        "say",
        "said",
        "remind",
        "talk",
        "talked",
        "discuss",
        "discussed",
        "happen",
        "happened",
    ]
)
JA_PARTICLES = re.compile(
    r"[のにをはがでともへやか何、。？?！!「」『』（）()\s]+|について|って|ました|した"
)


RRF_K = 60
"""Reciprocal rank fusion's constant: a hit's score is the sum over the legs that found
it of 1 / (RRF_K + its rank there). bench/memory_fusion.py measured k from 1 to 100 on
its generated set: all ranked alike (the lexical leg's lists are short and precise), so
the conventional 60 is kept (see the README)."""

FUSION_DEPTH = 30
"""How many hits each leg hands to the fusion at least (3 x the limit when more)."""

Leg = Literal["lexical", "vector"]


SearchMode = Literal["hybrid", "lexical", "vector"]


class MemorySearch(BaseModel):
    """A memory search's hits, the legs that ran, a note saying how it went, and the
    span of time its query named (None: it named none)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    hits: list[SearchResult]
    legs: list[Leg]
    note: str
    window: TimeWindow | None = None


class MemoryManager:
    """One agent's memory; see the module docstring."""

    def __init__(self, db: Database, agent_id: str) -> None:
        self.db = db
        self.agent_id = str(agent_id)

    # ------------------------------------------------------------ curated memory
    def list_curated(self, category: str | None = None) -> list[CuratedMemory]:
        """The agent's curated memories (of one category when given)."""
        return repo.list_curated(self.db, self.agent_id, category)

    def save_curated(self, category: str, content: str, *, id: str | None = None) -> CuratedMemory:
        """Add a memory (merged into one of its category saying the same: `remember`), or
        replace memory `id`'s category and content."""
        category = category.strip()
        if not category or len(category) > 64:
            raise ValidationError("category must be 1 to 64 characters")
        if not content.strip():
            raise ValidationError("memory content is empty")
        if id is None:
            return self.remember(category, content)[0]
        return repo.save_curated(self.db, self.agent_id, category, content, id)

    def remember(self, category: str, content: str) -> tuple[CuratedMemory, bool]:
        """Keep a memory, merged into an older one of `category` that says the same
        (`says_the_same`; the longer text is kept) rather than kept twice. Returns the
        memory and whether it was merged."""
        category = category.strip()
        if not category or len(category) > 64:
            raise ValidationError("category must be 1 to 64 characters")
        if not content.strip():
            raise ValidationError("memory content is empty")
        return repo.remember_curated(self.db, self.agent_id, category, content, says_the_same)

    def delete_curated(self, id: str) -> None:
        """Forget one curated memory (NotFoundError if there is none)."""
        repo.delete_curated(self.db, self.agent_id, id)

    # ------------------------------------------------------------ session logs
    def append_session_log(self, log: SessionLog, *, conn: Connection | None = None) -> None:
        """Store one log line (see `append_session_logs`)."""
        self.append_session_logs([log], conn=conn)

    def append_session_logs(
        self, logs: Sequence[SessionLog], *, conn: Connection | None = None
    ) -> None:
        """Store log lines (in `conn`'s transaction when given); the search index follows."""
        if not logs:
            return
        if conn is not None:
            repo.append_logs(conn, self.agent_id, logs)
        else:
            with self.db.write() as own:
                repo.append_logs(own, self.agent_id, logs)

    def session_logs(
        self,
        session_id: str,
        *,
        limit: int = 100,
        log_types: Iterable[str] | None = None,
    ) -> list[StoredLog]:
        """A session's latest `limit` lines, oldest first."""
        return repo.latest_logs(
            self.db,
            self.agent_id,
            limit=limit,
            session_id=str(session_id),
            log_types=None if log_types is None else list(log_types),
        )

    def log_batches(self, session_id: str, *, batch: int = 500) -> Iterator[list[StoredLog]]:
        """All of a session's lines, oldest first, read `batch` at a time.

        Each batch is its own short read; lines written after the first batch was read
        are left out, so a long read neither blocks writers nor chases a live session.
        """
        return repo.log_batches(self.db, self.agent_id, str(session_id), batch=batch)

    def recent_logs(self, *, limit: int = 100) -> list[StoredLog]:
        """The agent's latest `limit` lines across sessions, oldest first."""
        return repo.latest_logs(self.db, self.agent_id, limit=limit)

    def sessions(self, *, limit: int | None = None) -> list[SessionSummary]:
        """Sessions the agent has logs in, newest activity first (the first `limit`)."""
        return repo.log_sessions(self.db, self.agent_id, limit=limit)

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        session_id: str | None = None,
        log_types: Iterable[str] | None = None,
        now: datetime | None = None,
    ) -> list[SearchResult]:
        """Session log lines for `query`, best first (`search_detail`'s hits)."""
        return self.search_detail(
            query, limit=limit, session_id=session_id, log_types=log_types, now=now
        ).hits

    def search_detail(
        self,
        query: str,
        *,
        limit: int = 10,
        session_id: str | None = None,
        log_types: Iterable[str] | None = None,
        now: datetime | None = None,
        mode: SearchMode = "hybrid",
    ) -> MemorySearch:
        """Hybrid search of the session logs: the lexical leg and the vector leg, fused by
        reciprocal rank (`RRF_K`); each hit names the leg(s) that found it and keeps its
        time (`created_at`).

        Lexical: lines containing every word of `query` (case-insensitive, any language,
        either database): words of 3+ characters rank with bm25 (SQLite: the trigram FTS
        index; PostgreSQL: pg_trgm); with only shorter words the newest matching lines
        come first. The query is always literal text, never query syntax.

        Vector: the lines whose stored vectors (the agent's embedder, written in the
        background by core/memory_index.py) are nearest to the query's. When the agent has
        no vectors yet, or its embedder cannot run here, the search is lexical alone and
        `note` says why.

        Time: a query naming a span ("what did we decide last Tuesday", 先週の火曜日, 昨日:
        core/memory_time.py; days counted in `now`'s zone, default the server's) searches
        that span (`window`). The lexical leg puts the span's lines holding every other
        word of the query first; then the lines holding every word of the query itself at
        any time (the words of the time may be a line's: "meet on Friday"); then the
        span's lines holding some of its words (question words and particles left out),
        most first; then, when there is no vector leg, the span's other lines, newest
        first (with one they would be fused as evidence they are not). The vector leg
        looks only at the span's lines, nearest to the query without its time; a query
        that is a time alone ("昨日", "yesterday") has no vector leg.

        `mode` "lexical" or "vector" runs one leg alone (`opencrab memory eval` scores
        each); "vector" alone with no usable vectors finds nothing, `note` saying why.
        """
        terms = search_terms(query)
        if not terms:
            raise ValidationError("search query is empty")
        limit = max(1, min(int(limit), 100))
        types = list(log_types) if log_types is not None else []
        bad = [t for t in types if t not in LOG_TYPES]
        if bad:
            raise ValidationError(f"unknown log types {bad}; known: {', '.join(LOG_TYPES)}")
        session = None if session_id is None else str(session_id)
        window = time_window(query, now)
        depth = limit if mode == "lexical" else max(limit * 3, FUSION_DEPTH)
        vector: list[tuple[int, float]] | None = None
        note = "lexical only: asked for the lexical leg alone"
        if mode != "lexical":
            text = " ".join(terms) if window is None else " ".join(search_terms(window.rest))
            if text:
                vector, note = self._vector_leg(text, depth, session, types, window)
            else:
                note = "lexical only: the query names a time and nothing else"
        lexical: list[SearchResult] = []
        if mode != "vector" and window is None and vector is not None:
            # fused: the lexical leg's ids alone; only the lines kept are read
            ids = repo.search_ranked(
                self.db, self.agent_id, terms, limit=depth, session_id=session, log_types=types
            )
            return MemorySearch(
                hits=self._fused([i for i, _ in ids], vector, limit),
                legs=["lexical", "vector"],
                note=note,
                window=window,
            )
        if mode != "vector":
            # the span's other lines fill a lexical answer, but are no evidence to fuse
            fill = vector is None
            lexical = self._lexical_leg(terms, window, depth, session, types, fill=fill)
        if mode == "vector":
            hits = [] if vector is None else self._fused([], vector, limit)
            legs: list[Leg] = [] if vector is None else ["vector"]
            return MemorySearch(hits=hits, legs=legs, note=note, window=window)
        if vector is None:
            hits = [hit.model_copy(update={"legs": ["lexical"]}) for hit in lexical[:limit]]
            return MemorySearch(hits=hits, legs=["lexical"], note=note, window=window)
        return MemorySearch(
            hits=self._fused([h.id for h in lexical], vector, limit, known=lexical),
            legs=["lexical", "vector"],
            note=note,
            window=window,
        )

    def search_in_time(
        self,
        query: str,
        *,
        limit: int = 10,
        session_id: str | None = None,
        log_types: Iterable[str] | None = None,
        now: datetime | None = None,
    ) -> MemorySearch:
        """`search_detail` (hybrid, within the span the query names), by the name the
        time-aware callers use."""
        return self.search_detail(
            query, limit=limit, session_id=session_id, log_types=log_types, now=now
        )

    def _lexical_leg(
        self,
        terms: list[str],
        window: TimeWindow | None,
        limit: int,
        session_id: str | None,
        log_types: list[str],
        *,
        fill: bool = True,
    ) -> list[SearchResult]:
        """The lexical leg's hits, best first, within `window` first when there is one
        (see `search_detail`); `fill`: the span's other lines, newest first, after them."""
        where: dict[str, Any] = {
            "limit": limit,
            "session_id": session_id,
            "log_types": log_types,
        }
        if window is None:
            return repo.search(self.db, self.agent_id, terms, **where)
        where.update(since=window.start, until=window.end)
        rest = search_terms(window.rest) if window.rest else []
        found: dict[int, SearchResult] = {}
        if rest:
            for hit in repo.search(self.db, self.agent_id, rest, **where):
                found.setdefault(hit.id, hit)
        # the words of the time may be words of a line too ("meet on Friday"): the lines
        # holding every word of the query, at any time, come next
        anytime = {**where, "since": None, "until": None}
        for hit in repo.search(self.db, self.agent_id, terms, **anytime):
            found.setdefault(hit.id, hit)
        words = content_words(window.rest)
        if len(found) < limit and words and (len(words) > 1 or words != rest):
            matched: dict[int, tuple[int, SearchResult]] = {}
            for word in words:
                for hit in repo.search(self.db, self.agent_id, [word], **where):
                    count, _ = matched.get(hit.id, (0, hit))
                    matched[hit.id] = (count + 1, hit)
            ranked = sorted(matched.values(), key=lambda pair: (-pair[0], -pair[1].id))
            for _, hit in ranked:
                found.setdefault(hit.id, hit)
        if fill and len(found) < limit:
            for hit in repo.search(self.db, self.agent_id, [], **where):
                found.setdefault(hit.id, hit)
        return list(found.values())[:limit]

    def vector_unavailable(self) -> str | None:
        """Why this agent's search has no vector leg here (None: it has one)."""
        state = vectors_repo.embedder_state(self.db, self.agent_id)
        if state is None or state.dim is None:
            return "this agent's memory has no vectors yet"
        try:
            embedder = known_embedder(state.model)
        except EmbedderUnavailable as exc:
            return str(exc)
        if embedder is None:
            return f"the embedder {state.model} is not loaded in this process"
        return None  # the indexer wrote a vector (it keeps the dimension from then on)

    def _vector_leg(
        self,
        text: str,
        depth: int,
        session_id: str | None,
        log_types: list[str],
        window: TimeWindow | None,
    ) -> tuple[list[tuple[int, float]] | None, str]:
        """The vector leg's (log id, similarity) list, or None and why there is none."""
        state = vectors_repo.embedder_state(self.db, self.agent_id)
        if state is None or state.dim is None:
            return None, "lexical only: this agent's memory has no vectors yet"
        try:
            embedder = known_embedder(state.model)
        except EmbedderUnavailable as exc:
            return None, f"lexical only: {exc}"
        if embedder is None:
            return None, f"lexical only: the embedder {state.model} is not loaded in this process"
        try:
            query = query_vector(embedder, text)
        except EmbedderUnavailable as exc:
            return None, f"lexical only: {exc}"
        lines = None
        if session_id is not None or log_types or window is not None:
            lines = LineFilter(
                session_id=session_id,
                log_types=tuple(log_types),
                since=None if window is None else window.start,
                until=None if window is None else window.end,
            )
        found, embedded = nearest(
            self.db, self.agent_id, state.model, query, limit=depth, lines=lines
        )
        if not found:
            if window is not None and embedded:
                return [], f"hybrid: lexical + vector ({state.model}, no embedded line in the span)"
            return None, "lexical only: this agent's memory has no vectors yet"
        note = f"hybrid: lexical + vector ({state.model}, {embedded} lines embedded)"
        return found, note

    def _fused(
        self,
        lexical: list[int],
        vector: list[tuple[int, float]],
        limit: int,
        *,
        known: Iterable[StoredLog] = (),
    ) -> list[SearchResult]:
        """The fusion's best `limit` lines; only those not in `known` are read."""
        ranked = fuse({"lexical": lexical, "vector": [i for i, _ in vector]})
        best = ranked[:limit]
        lines: dict[int, StoredLog] = {hit.id: hit for hit in known}
        missing = [i for i, _, _ in best if i not in lines]
        lines.update(repo.logs_by_ids(self.db, self.agent_id, missing))
        return [
            SearchResult(**lines[i].model_dump(exclude={"score", "legs"}), score=score, legs=legs)
            for i, score, legs in best
            if i in lines
        ]

    # ------------------------------------------------------------ impressions
    def update_impression(
        self,
        session_id: str,
        target_id: str,
        target_name: str,
        *,
        personality: str | None = None,
        communication_style: str | None = None,
        recent_behavior: str | None = None,
        agreement: str | None = None,
        notes: str | None = None,
        turn: int | None = None,
    ) -> Impression:
        """Create or update the impression of `target_id`; fields left None are kept."""
        if not str(target_id).strip() or not str(target_name).strip():
            raise ValidationError("target_id and target_name must not be empty")
        fields = {
            "personality": personality,
            "communication_style": communication_style,
            "recent_behavior": recent_behavior,
            "agreement": agreement,
            "notes": notes,
        }
        values: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        values.update(target_name=target_name, updated_at=datetime.now(UTC))
        if turn is not None:
            values["last_updated_turn"] = turn
        return repo.save_impression(self.db, self.agent_id, str(session_id), str(target_id), values)

    def impressions(self, session_id: str) -> list[Impression]:
        """The impressions kept in one session, by target name."""
        return repo.session_impressions(self.db, self.agent_id, str(session_id))

    def all_impressions(self) -> list[Impression]:
        """Every impression the agent keeps, by target name, newest first for each."""
        return repo.all_impressions(self.db, self.agent_id)

    # ------------------------------------------------------------ context
    def build_context(self, language: Language, *, session_id: str | None = None) -> str:
        """The 【MEMORY】 section: core memories and impressions in this session; "" if none."""
        texts = prompts(language)
        curated = [m for m in self.list_curated() if m.category in CONTEXT_CATEGORIES]
        lines: list[str] = []
        for memory in curated:
            lines.append(f"- {memory.content.strip()}")
        seen = self.impressions(session_id) if session_id else []
        if seen:
            lines.append(texts["memory_impressions"])
            for imp in seen:
                parts = [
                    p
                    for p in (
                        imp.personality,
                        imp.communication_style,
                        imp.recent_behavior,
                        texts.render("memory_agreement", agreement=imp.agreement)
                        if imp.agreement
                        else "",
                        imp.notes,
                    )
                    if p
                ]
                lines.append(f"- {imp.target_name}: {' / '.join(parts)}")
        if not lines:
            return ""
        text = texts["memory_header"] + "\n" + "\n".join(lines)
        if len(text) > MAX_CONTEXT_CHARS:
            text = text[: MAX_CONTEXT_CHARS - 1] + "…"
        return text


def fuse(
    ranked: Mapping[Leg, Sequence[int]], k: float = RRF_K
) -> list[tuple[int, float, list[Leg]]]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (k + rank) over the legs
    that ranked it (rank 1 = best); returns (id, score, legs), best first (ties: newer
    line first)."""
    scores: dict[int, float] = {}
    legs: dict[int, list[Leg]] = {}
    for leg, ids in ranked.items():
        for rank, line in enumerate(ids, start=1):
            scores[line] = scores.get(line, 0.0) + 1.0 / (k + rank)
            legs.setdefault(line, []).append(leg)
    order = sorted(scores, key=lambda i: (-scores[i], -i))
    return [(i, scores[i], legs[i]) for i in order]


def search_terms(query: str) -> list[str]:
    """The words `search` looks for: split at whitespace, each once, in order."""
    if not isinstance(query, str):
        raise ValidationError("search query must be a string")
    cleaned = "".join(" " if ord(c) < 32 else c for c in query[:MAX_QUERY_CHARS])
    terms: list[str] = []
    for word in cleaned.split():
        if word not in terms:
            terms.append(word)
    return terms


def content_words(text: str) -> list[str]:
    """The words of `text` a remembered line would hold: question words (English) and
    particles (Japanese) left out, each cut to its stem (an inflected ending dropped:
    "decided" → "decid", 決めた → 決, so "decide" and 決めました are found); each once, in
    order."""
    words: list[str] = []
    for piece in JA_PARTICLES.split(unicodedata.normalize("NFKC", text)):
        word = stem(piece.strip(" .,;:!?\"'").lower())
        if word and word not in QUESTION_WORDS and word not in words:
            words.append(word)
    return words


KANJI = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
HIRAGANA_END = re.compile(r"[\u3040-\u309f]+$")
ENGLISH_ENDING = re.compile(r"(?<=[a-z]{3})(?:ing|ed|es|s)$")


def stem(word: str) -> str:
    """`word` without an inflected ending: a Japanese word written kanji then kana is cut
    after its last kanji (決めた → 決, 話した → 話); an English one loses -ing, -ed, -es, -s."""
    if HIRAGANA_END.search(word) and KANJI.search(word):
        last = max(m.end() for m in KANJI.finditer(word))
        return word[:last]
    if word.isascii() and word not in QUESTION_WORDS:
        return ENGLISH_ENDING.sub("", word)
    return word


def normalised(text: str) -> str:
    """`text` compared for sameness: NFKC, case-folded, punctuation dropped, one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(c if c.isalnum() or c.isspace() else " " for c in folded)
    return " ".join(kept.split())


def trigrams(text: str) -> set[str]:
    """Character trigrams of a normalised text (spaces count: words' edges matter)."""
    padded = f" {text} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def says_the_same(old: str, new: str) -> bool:
    """Whether two memory texts say the same: equal once normalised, or sharing at least
    SAME_TRIGRAMS of their character trigrams (so "The user's cat is called Tama." and
    "the user's cat is called Tama" are one memory, and a changed number is not)."""
    a, b = normalised(old), normalised(new)
    if not a or not b:
        return False
    if a == b:
        return True
    if any(c.isdigit() for c in a + b) and re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return False  # "meet at 3" and "meet at 4" are two different facts
    x, y = trigrams(a), trigrams(b)
    return len(x & y) / len(x | y) >= SAME_TRIGRAMS
