"""The vector leg of memory search: the stored vectors nearest to a query's.

`nearest` is what search calls; where it ranks depends on the database
(store/repositories/memory_vectors.py: `vector_store`):

- PostgreSQL with pgvector: in the database (`ORDER BY embedding <=> query LIMIT k`,
  cosine): every vector of the agent compared up to EXACT_UP_TO of them, the HNSW index
  of their dimension past that; how many vectors an agent has is counted at most every
  RECOUNT_SECS.
- SQLite, or PostgreSQL without pgvector: `VectorIndex`, exact cosine in process. It keeps
  one float32 matrix per (database, agent, embedder) — together at most `MAX_BYTES`, the
  least recently searched let go first — and reads only the rows stored since its last
  read (`seq` grows with each insert). When the number of stored vectors is not what the
  matrix holds (lines were deleted; counted at most every RECOUNT_SECS), the matrix is
  read again whole.

A search in process reads the whole matrix, so its cost is memory bandwidth: at 100,000
lines of 384 dimensions the float32 product (154 MB) takes ~20 ms of CPU here. With the
`simsimd` package (in the `embed` extra) each matrix also keeps a float16 copy, which a
SIMD kernel scores in a third of that; the float16 scores are within `HALF_MARGIN` of the
float32 ones, so every line that could be among the best is scored again from the float32
rows, and the answer is the one the float32 product gives (bench/memory_search.py compares
them). The lines that can be among the best are scored again exactly (summed in float64,
rounded to float32) on either path, so both answer alike; lines with the same vector (the
same text said twice) come in the order they were stored.

Why not sqlite-vec on SQLite: the CPython builds this project runs on often lack
`sqlite3.enable_load_extension`, so it cannot load; the exact search in process returns
the same neighbours (and is faster than sqlite-vec's exact scan at 100,000 lines:
README "Where the vectors live").

Example:
    hits, embedded = nearest(db, agent_id, "opencrab/multilingual-e5-small", query, limit=20)
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from opencrab.store import Database
from opencrab.store.repositories import memory_vectors as repo

try:
    import simsimd
except ImportError:  # without the `embed` extra: the float32 product alone
    simsimd = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


MAX_BYTES = 512 * 1024 * 1024
"""What this process's matrices may hold together: past it, the matrices searched least
recently are let go (read again whole on their next search). 100,000 vectors of 384
dimensions are 154 MB, 231 MB with their float16 copy."""

HALF_MARGIN = 1.2e-3
"""How far (times |query| × the longest row) a float16 score may be from the exact one:
rounding both vectors to float16 moves a dot product by at most (2u + u²)·|q|·|x| with
u = 2⁻¹¹ (9.8e-4); the kernel sums in float32 (384 additions: 2.3e-5 more) and values
below float16's normal range lose at most 2⁻²⁵ each (under 1e-6 in all); 1.2e-3 bounds
the sum with room to spare."""

HALF_MOST = 0.125
"""When more than this share of the rows fall within the margin (near-identical vectors),
the float32 product of every row is cheaper than scoring them again one by one."""

EXACT_MARGIN = 1e-4
"""How far (times |query| × the longest row) a float32 product's score may be from the
exact one: 384 float32 additions err by at most 384 × 2⁻²⁴ (~2.3e-5) of |q|·|x|."""

EXACT_UP_TO = 5_000
"""pgvector compares every vector of an agent up to this many (the in-process search's
very answer, in milliseconds); past it, its HNSW index answers: nearly the same
neighbours, in far less time than comparing all (bench/memory_pgvector.py: at 100,000
vectors the exact scan in PostgreSQL took 460 ms, HNSW 24 ms holding 98.6 % of the exact
top 30, numpy in process 31 ms)."""

RECOUNT_SECS = 10.0
"""How often a matrix checks that no stored vector went (deleted lines): a deleted line
in between only takes a place among the candidates; its row is not found, so it is never
shown."""


@dataclass
class _Matrix:
    seq: int = 0  # the highest seq read
    counted_at: float = float("-inf")  # (monotonic) when the stored vectors were last counted
    ids: Any = None  # int64 log ids, one per row
    rows: Any = None  # float32 (n, dim)
    half: Any = None  # float16 copy of rows (with simsimd), else None
    longest: float = 0.0  # the largest row norm
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        if self.ids is None:
            return 0
        half = 0 if self.half is None else self.half.nbytes
        return int(self.ids.nbytes + self.rows.nbytes + half)

    def clear(self) -> None:
        self.seq, self.ids, self.rows, self.half, self.longest = 0, None, None, None, 0.0


class VectorIndex:
    """Per-process matrices of stored vectors, refreshed on each search; together at most
    `max_bytes` (the least recently searched are let go first)."""

    def __init__(self, max_bytes: int = MAX_BYTES, *, half: bool | None = None) -> None:
        self.max_bytes = max_bytes
        # half: score a float16 copy first (None: when simsimd is installed)
        self.half = simsimd is not None if half is None else half
        if self.half and simsimd is None:
            raise RuntimeError("float16 scoring needs the simsimd package (opencrab[embed])")
        self._matrices: OrderedDict[tuple[int, str, str], _Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def _matrix(self, db: Database, agent_id: str, model: str) -> _Matrix:
        key = (id(db), agent_id, model)
        with self._lock:
            found = self._matrices.get(key)
            if found is None:
                found = self._matrices[key] = _Matrix()
            self._matrices.move_to_end(key)  # the most recently searched last
            return found

    def _evict(self, keep: _Matrix) -> None:
        """Let go of the least recently searched matrices (never `keep`) while together
        they hold more than `max_bytes`."""
        with self._lock:
            total = sum(m.nbytes for m in self._matrices.values())
            for key in list(self._matrices):
                if total <= self.max_bytes:
                    break
                matrix = self._matrices[key]
                if matrix is keep:
                    continue
                total -= matrix.nbytes
                del self._matrices[key]

    @property
    def nbytes(self) -> int:
        """What the matrices hold now, in bytes."""
        with self._lock:
            return sum(m.nbytes for m in self._matrices.values())

    def _refresh(self, db: Database, agent_id: str, model: str, matrix: _Matrix) -> None:
        import numpy as np

        new = repo.vectors_since(db, agent_id, model, matrix.seq)
        held = 0 if matrix.ids is None else len(matrix.ids)
        if new:
            dims = {len(blob) for _, _, blob in new}
            if len(dims) > 1 or (matrix.rows is not None and matrix.rows.shape[1] * 4 not in dims):
                matrix.clear()  # dimension changed
                new, held = repo.vectors_since(db, agent_id, model, 0), 0
        if new:
            ids = np.fromiter((log_id for _, log_id, _ in new), dtype=np.int64, count=len(new))
            rows = np.frombuffer(b"".join(blob for _, _, blob in new), dtype=np.float32)
            rows = rows.reshape(len(new), -1)
            half = rows.astype(np.float16) if self.half else None
            longest = float(np.sqrt(np.einsum("ij,ij->i", rows, rows).max()))
            if matrix.ids is None:
                matrix.ids, matrix.rows, matrix.half = ids, rows, half
            else:
                matrix.ids = np.concatenate([matrix.ids, ids])
                matrix.rows = np.concatenate([matrix.rows, rows])
                if half is not None:
                    matrix.half = np.concatenate([matrix.half, half])
            matrix.longest = max(matrix.longest, longest)
            matrix.seq = new[-1][0]
        now = time.monotonic()
        if held and now - matrix.counted_at >= RECOUNT_SECS:
            matrix.counted_at = now
            if repo.count_embedded(db, agent_id, model) != len(matrix.ids):
                matrix.clear()  # lines were deleted
                self._refresh(db, agent_id, model, matrix)

    def search(
        self,
        db: Database,
        agent_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        *,
        limit: int,
        only: Collection[int] | None = None,
    ) -> list[tuple[int, float]]:
        """The `limit` stored lines nearest to `query` (cosine), best first, as (log id,
        similarity); within `only` (log ids) when given."""
        import numpy as np

        matrix = self._matrix(db, agent_id, model)
        with matrix.lock:
            self._refresh(db, agent_id, model, matrix)
            ids, rows, half, longest = matrix.ids, matrix.rows, matrix.half, matrix.longest
        self._evict(keep=matrix)
        if ids is None or not len(ids) or rows.shape[1] != query.shape[0]:
            return []
        query = np.ascontiguousarray(query, dtype=np.float32)
        allowed = None
        if only is not None:
            allowed = np.isin(ids, np.fromiter(only, dtype=np.int64, count=len(only)))
        k = min(limit, len(ids))
        scale = float(np.linalg.norm(query)) * longest
        if half is not None:
            approx = np.asarray(
                simsimd.cdist(
                    query.astype(np.float16).reshape(1, -1),
                    half,
                    metric="dot",
                    out_dtype="float32",
                ),
                dtype=np.float32,
            ).reshape(-1)
            near = _near(approx, allowed, k, (2 * HALF_MARGIN + EXACT_MARGIN) * scale)
            if len(near) <= HALF_MOST * len(ids):
                return _rescored(ids, rows, query, near, k)
        scores = rows @ query
        return _rescored(ids, rows, query, _near(scores, allowed, k, EXACT_MARGIN * scale), k)

    def held(self, db: Database, agent_id: str, model: str) -> int:
        """How many vectors the agent's matrix held at its last refresh."""
        matrix = self._matrix(db, agent_id, model)
        return 0 if matrix.ids is None else len(matrix.ids)

    def forget(self, db: Database) -> None:
        """Drop every matrix of `db` (it was closed), and its counts."""
        with self._lock:
            for key in [k for k in self._matrices if k[0] == id(db)]:
                del self._matrices[key]
        with _COUNTS_LOCK:
            for key in [k for k in _COUNTS if k[0] == id(db)]:
                del _COUNTS[key]


def _near(scores: Any, allowed: Any, k: int, margin: float) -> Any:
    """The rows (indexes) whose `scores` are within `margin` of the k-th best allowed
    one: every row that can be among the k best once scored exactly."""
    import numpy as np

    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    n = len(scores)
    kth = np.partition(scores, n - k)[n - k]
    if not np.isfinite(kth):  # fewer than k allowed rows: every allowed one
        return np.flatnonzero(np.isfinite(scores))
    return np.flatnonzero(scores >= kth - margin)


def _rescored(ids: Any, rows: Any, query: Any, near: Any, k: int) -> list[tuple[int, float]]:
    """The `k` best of the rows `near`, scored exactly: summed in float64 (so no row's
    score depends on which other rows are scored with it) and rounded to float32; ties
    go to the lower id (stored first)."""
    import numpy as np

    if not len(near):
        return []
    scores = (rows[near].astype(np.float64) @ query.astype(np.float64)).astype(np.float32)
    found = ids[near]
    order = np.lexsort((found, -scores))[:k]
    return [(int(found[i]), float(scores[i])) for i in order]


VECTORS = VectorIndex()
"""This process's vector matrices."""


@dataclass(frozen=True)
class LineFilter:
    """Which of an agent's lines a search looks at (each part when given)."""

    session_id: str | None = None
    log_types: tuple[str, ...] = ()
    since: datetime | None = None  # created_at >= since
    until: datetime | None = None  # created_at < until


_COUNTS: dict[tuple[int, str, str], tuple[float, int]] = {}  # key -> (counted at, count)
_COUNTS_LOCK = threading.Lock()


def _embedded(db: Database, agent_id: str, model: str, *, fresh: bool = False) -> int:
    """How many `model` vectors the agent has, counted at most every RECOUNT_SECS (now,
    when `fresh`)."""
    key, now = (id(db), agent_id, model), time.monotonic()
    with _COUNTS_LOCK:
        known = _COUNTS.get(key)
    if not fresh and known is not None and now - known[0] < RECOUNT_SECS:
        return known[1]
    count = repo.count_embedded(db, agent_id, model)
    with _COUNTS_LOCK:
        _COUNTS[key] = (now, count)
    return count


def nearest(
    db: Database,
    agent_id: str,
    model: str,
    query: npt.NDArray[np.float32],
    *,
    limit: int,
    lines: LineFilter | None = None,
) -> tuple[list[tuple[int, float]], int]:
    """The `limit` lines (within `lines`) whose `model` vectors are nearest to `query`
    (unit length) by cosine, best first, as (log id, similarity); and how many vectors
    of `model` the agent has. pgvector ranks when the database has it (exactly up to
    EXACT_UP_TO vectors, by its HNSW index past that), else `VECTORS`."""
    if repo.vector_store(db).in_database:
        count = _embedded(db, agent_id, model)
        found = repo.nearest(
            db,
            agent_id,
            model,
            query.astype("<f4").tobytes(),
            limit=limit,
            exact=count <= EXACT_UP_TO,
            **({} if lines is None else vars(lines)),
        )
        if not found or len(found) > count:  # the count is older than the vectors
            count = _embedded(db, agent_id, model, fresh=True)
        return found, count
    only = None
    if lines is not None:
        only = repo.lines_matching(
            db,
            agent_id,
            lines.session_id,
            lines.log_types,
            since=lines.since,
            until=lines.until,
        )
    found = VECTORS.search(db, agent_id, model, query, limit=limit, only=only)
    return found, VECTORS.held(db, agent_id, model)
