"""Response-time statistics of `llm_usage_metrics` per provider (the "LLMモニタリング").

Totals per provider (calls, errors, tokens, cost, mean latency) are
`metrics.group_totals(conn, "provider", …)`; this adds the latency percentiles and the
slowest call of the successful calls: over many calls from the per-day speed histograms
(within 2 %), else exactly, which SQL's aggregates cannot give portably: one count and
one ordered, offset read per percentile, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.repositories.llm_analytics import (
    EXACT_UP_TO,
    UsageFilter,
    histogram_rank,
    speed_histograms,
)
from opencrab.store.tables import llm_usage_metrics as metrics


class LatencyStats(NamedTuple):
    provider: str
    ok_calls: int
    p50_ms: int | None
    p95_ms: int | None
    max_ms: int | None


def latency_stats(
    conn: Connection, *, since: datetime | None, exact: bool | None = None
) -> dict[str, LatencyStats]:
    """Median, 95th percentile (nearest rank) and maximum latency of successful calls,
    per provider, since `since` (all when None).

    Over more than EXACT_UP_TO calls (`exact` None) or with `exact` False the
    percentiles are read from the speed histograms (llm_analytics.speed_histograms),
    within PERCENTILE_ERROR of the exact values; the maximum is exact either way."""
    if not exact:
        found = speed_histograms(conn, UsageFilter(since=since), by="provider", metric="latency")
        latency = {k: bs for (k, _), bs in found.items()}
        if exact is False or sum(b.calls for bs in latency.values() for b in bs) > EXACT_UP_TO:
            return {
                provider: LatencyStats(
                    provider=provider,
                    ok_calls=sum(b.calls for b in buckets),
                    p50_ms=histogram_rank(buckets, 0.5),
                    p95_ms=histogram_rank(buckets, 0.95),
                    max_ms=max(b.high for b in buckets),
                )
                for provider, buckets in sorted(latency.items())
            }
    m = metrics.c
    where = [m.status == "ok"]
    if since is not None:
        where.append(m.timestamp >= since)
    counts = conn.execute(
        sa.select(m.provider, sa.func.count(), sa.func.max(m.latency_ms))
        .where(*where)
        .group_by(m.provider)
    ).all()
    out: dict[str, LatencyStats] = {}
    for provider, count, slowest in counts:

        def rank(q: float, provider: str = provider, count: int = count) -> int | None:
            offset = max(0, math.ceil(q * count) - 1)
            return conn.execute(
                sa.select(m.latency_ms)
                .where(*where, m.provider == provider)
                .order_by(m.latency_ms)
                .limit(1)
                .offset(offset)
            ).scalar_one_or_none()

        out[provider] = LatencyStats(
            provider=provider,
            ok_calls=int(count),
            p50_ms=rank(0.5),
            p95_ms=rank(0.95),
            max_ms=None if slowest is None else int(slowest),
        )
    return out
