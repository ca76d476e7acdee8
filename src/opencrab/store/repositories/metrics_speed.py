"""The successful calls' latency and TTFT as per-day histograms (`llm_usage_speed`):
one row per UTC day × provider × model × source (live | imported) × metric (latency |
ttft) × bucket, counting the calls whose value fell in the bucket with the smallest and
largest of them. Buckets are the values themselves below EXACT_BELOW ms and log-spaced
(BUCKET_RATIO) above, so a percentile read from them is within PERCENTILE_ERROR of the
exact nearest-rank value.

This module is the table's only writer. The metrics repository (store/repositories/
metrics.py) adds every stored call to it in the transaction of the insert
(`speed_counts`, then `accumulate_speed`); the Costs page's speed chart and the LLM
monitoring read it (store/repositories/llm_analytics.py, llm_monitoring.py) instead of
ranking the calls.

Example:
    with db.write() as conn:
        accumulate_speed(conn, speed_counts(rows, [utc_day_key(r.timestamp) for r in rows]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.prepared import Prepared
from opencrab.store.repositories.metric_rows import AT, COLUMNS, chunks
from opencrab.store.tables import llm_usage_daily as daily
from opencrab.store.tables import llm_usage_metrics as metrics
from opencrab.store.tables import llm_usage_speed as speed_table

EXACT_BELOW = 128
"""Values (ms) below this have a bucket each: their percentiles are exact."""
BUCKET_RATIO = 1.03
"""Above EXACT_BELOW a bucket spans [lo, lo × BUCKET_RATIO): log-spaced, so its error is
relative."""
PERCENTILE_ERROR = 0.02
"""The bound on a percentile read from the histograms, relative to the exact
nearest-rank value: a bucket's representative (`bucket_value`) is within
(r - 1) / (r + 1) = 1.48 % of every value in [lo, lo × r) for r = BUCKET_RATIO, plus at
most 0.5 ms of rounding (0.39 % at EXACT_BELOW ms) — under 2 %."""
_LOG_RATIO = math.log(BUCKET_RATIO)
SPEED_KEYS = ("day", "provider", "model", "source", "metric", "bucket")
"""The speed histograms' key: a successful call adds 1 to the bucket of its latency
(metric `latency`) and, when streamed with a first token, of its TTFT (`ttft`)."""


def speed_bucket(value: int) -> int:
    """The histogram bucket of a latency or TTFT in ms: the value itself below
    EXACT_BELOW, above it EXACT_BELOW + ⌊log(value / EXACT_BELOW) / log(BUCKET_RATIO)⌋."""
    if value < EXACT_BELOW:
        return max(0, int(value))
    return EXACT_BELOW + int(math.log(value / EXACT_BELOW) / _LOG_RATIO)


def bucket_value(bucket: int, low: int, high: int) -> int:
    """The value a percentile falling in `bucket` is read as: the bucket's harmonic middle
    (within PERCENTILE_ERROR of any value in it), kept within the smallest (`low`) and
    largest (`high`) value the bucket has seen, so a bucket of one value reads exactly."""
    if bucket < EXACT_BELOW:
        return bucket
    lo = EXACT_BELOW * BUCKET_RATIO ** (bucket - EXACT_BELOW)
    middle = round(2 * lo * lo * BUCKET_RATIO / (lo + lo * BUCKET_RATIO))
    return min(max(middle, low), high)


def source_of(purpose: str) -> str:
    """`imported` for the calls the transcript importers wrote (purpose `import`), else
    `live` (store/repositories/llm_analytics.IMPORT_PURPOSE)."""
    return "imported" if purpose == "import" else "live"


def speed_counts(
    rows: Sequence[Sequence[Any]], days: Sequence[str]
) -> dict[tuple[Any, ...], list[int]]:
    """What rows (values in COLUMNS order) add to the speed histograms: [calls, min, max]
    by SPEED_KEYS, of the successful calls only, `days[i]` the UTC day key of row i."""
    provider, model, purpose, status, latency, ttft = (
        AT[n]
        for n in ("provider", "model", "purpose", "status", "latency_ms", "time_to_first_token_ms")
    )
    out: dict[tuple[Any, ...], list[int]] = {}
    for r, day in zip(rows, days, strict=True):
        if r[status] != "ok":
            continue
        source = source_of(r[purpose])
        for metric, value in (("latency", r[latency]), ("ttft", r[ttft])):
            if value is None:
                continue
            v = int(value)
            key = (day, r[provider], r[model], source, metric, speed_bucket(v))
            had = out.get(key)
            if had is None:
                out[key] = [1, v, v]
            else:
                had[0] += 1
                had[1] = min(had[1], v)
                had[2] = max(had[2], v)
    return out


def _speed_upsert(dialect: Any, *, rows: list[dict[str, Any]]) -> Any:
    from sqlalchemy.dialects import postgresql as pg_sql
    from sqlalchemy.dialects import sqlite as lite_sql

    lite = dialect.name == "sqlite"
    stmt = (lite_sql.insert if lite else pg_sql.insert)(speed_table).values(rows)
    c, new = speed_table.c, stmt.excluded
    smaller, larger = (sa.func.min, sa.func.max) if lite else (sa.func.least, sa.func.greatest)
    return stmt.on_conflict_do_update(
        index_elements=list(SPEED_KEYS),
        set_={
            "calls": c.calls + new.calls,
            "min_ms": smaller(c.min_ms, new.min_ms),
            "max_ms": larger(c.max_ms, new.max_ms),
        },
    )


_SPEED_UPSERTS: dict[int, Prepared] = {}
_SPEED_COLUMNS = (*SPEED_KEYS, "calls", "min_ms", "max_ms")


def accumulate_speed(conn: Connection, counts: dict[tuple[Any, ...], list[int]]) -> None:
    """Add `counts` to the histogram rows of their keys (created when missing), in key
    order so two writers take the rows' locks in the same order (as metrics.py's rollups)."""
    keys = sorted(counts)
    for start, count in chunks(len(keys)):
        found = _SPEED_UPSERTS.get(count)
        if found is None:
            rows: list[dict[str, Any]] = [
                {n: sa.bindparam(f"{n}_{i}") for n in _SPEED_COLUMNS} for i in range(count)
            ]
            found = _SPEED_UPSERTS[count] = Prepared(partial(_speed_upsert, rows=rows))
        params: dict[str, Any] = {}
        for i, key in enumerate(keys[start : start + count]):
            values = (*key, *counts[key])
            params.update({f"{n}_{i}": v for n, v in zip(_SPEED_COLUMNS, values, strict=True)})
        found.run(conn, **params)


def rebuild_speed(conn: Connection) -> int:
    """Derive the speed histograms again from every stored call, one UTC day at a time
    (the migration that made them back-fills with this); the number of calls counted."""
    conn.execute(speed_table.delete())
    m = metrics.c
    days = sorted(str(d) for d in conn.execute(sa.select(daily.c.day).distinct()).scalars())
    columns = [m[n] for n in COLUMNS]
    counted = 0
    for day in days:
        start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
        rows = conn.execute(
            sa.select(*columns).where(
                m.status == "ok", m.timestamp >= start, m.timestamp < start + timedelta(days=1)
            )
        ).all()
        counted += len(rows)
        accumulate_speed(conn, speed_counts(rows, [day] * len(rows)))
    return counted
