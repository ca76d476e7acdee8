"""The stored shape of one LLM call (`llm_usage_metrics`), shared by the metrics
repository (store/repositories/metrics.py, the calls and their daily rollups) and the
speed histograms it keeps with them (store/repositories/metrics_speed.py): the row, its
columns' positions, and how the rollups' upserts are cut into statements.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import NamedTuple


class MetricRow(NamedTuple):
    """One call attempt as stored (every column of `llm_usage_metrics`)."""

    id: str
    agent_id: str
    session_id: str | None
    timestamp: datetime
    provider: str
    model: str
    purpose: str
    task_type: str | None
    complexity: str | None
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    estimated_cost_usd: float
    cost_source: str
    latency_ms: int
    time_to_first_token_ms: int | None
    status: str
    error_type: str | None
    error: str | None
    stream: bool
    request_id: str | None
    attempt: int
    fallback_from: str | None
    quality_score: float | None
    self_evaluation: str | None
    task_success: bool | None
    would_use_again: bool | None
    better_model_suggestion: str | None
    created_at: datetime


COLUMNS: tuple[str, ...] = MetricRow._fields
"""The columns `metrics.insert` writes and reads return, in MetricRow order."""
AT = {name: COLUMNS.index(name) for name in COLUMNS}
"""A column's position in a row (stored, or as bound for an insert)."""

CHUNK = 256
"""Rollup rows per upsert statement at most (a power of two: statements of 1, 2, 4, …
rows are compiled once each and reused)."""


def chunks(total: int) -> Iterator[tuple[int, int]]:
    """(start, count) of the upsert statements that write `total` sorted rollup rows:
    CHUNK at a time, then the remainder in falling powers of two."""
    start = 0
    while start < total:
        count = min(CHUNK, 1 << ((total - start).bit_length() - 1))
        yield start, count
        start += count
