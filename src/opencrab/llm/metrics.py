"""LLM usage metrics (seed 001 `llm_usage_metrics`): one row per call attempt.

`MetricsRecorder` writes rows from a background task in batches, so recording adds
no database round trip to a call; `flush()` waits until everything queued is stored.
What was spent, on what and how fast, by period and grouping, is a report
(opencrab.reports.llm_metrics) over the repository's grouped totals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Literal

from sqlalchemy.engine import Connection

from opencrab.errors import ValidationError
from opencrab.llm.pricing import CostSource, PriceBook
from opencrab.llm.types import Usage
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories import reservations
from opencrab.store.repositories.metrics import MetricRow
from opencrab.store.types import utcnow

log = logging.getLogger(__name__)

PRICE_TTL_SECS = 5.0
"""How old the price table a recorder holds may get before it is read again."""

SYSTEM_AGENT = "system"
"""agent_id of calls made for nobody in particular (e.g. `opencrab llm chat`)."""


@dataclass
class CallRecord:
    """One attempt of one LLM call, as stored."""

    id: str
    provider: str
    model: str
    purpose: str
    agent_id: str = SYSTEM_AGENT
    session_id: str | None = None
    task_type: str | None = None
    complexity: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_cost_usd: float = 0.0
    cost_source: CostSource = "pricing"
    latency_ms: int = 0
    time_to_first_token_ms: int | None = None
    status: Literal["ok", "error"] = "ok"
    error_type: str | None = None
    error: str | None = None
    stream: bool = False
    request_id: str | None = None
    attempt: int = 1
    fallback_from: str | None = None  # "provider/model" whose failure led to this attempt
    timestamp: datetime = field(default_factory=utcnow)
    # quality: filled in later by evaluate_response
    quality_score: float | None = None
    self_evaluation: str | None = None
    task_success: bool | None = None
    would_use_again: bool | None = None
    better_model_suggestion: str | None = None
    # a budget reservation under this id holds the call's estimate until this row is
    # stored (core/reservations.py); the insert settles it in the same transaction
    reserved: bool = False

    def set_usage(self, usage: Usage) -> None:
        self.input_tokens = usage.input_tokens
        self.output_tokens = usage.output_tokens
        self.total_tokens = usage.total_tokens or usage.input_tokens + usage.output_tokens
        self.cache_read_tokens = usage.cache_read_tokens
        self.cache_write_tokens = usage.cache_write_tokens
        self.reasoning_tokens = usage.reasoning_tokens

    def as_row(self) -> MetricRow:
        """The stored row (created_at is the call's time): the one encoder of a call's
        `llm_usage_metrics` row, for the turn recorder, the router and the transcript
        importer alike."""
        return MetricRow._make((*_ROW_FIELDS(self), self.timestamp))


_ROW_FIELDS = attrgetter(*MetricRow._fields[:-1])
"""A CallRecord's values of every MetricRow column but created_at, in column order."""


class MetricsRecorder:
    """Queue CallRecords and store them in batches on a background task.

    Example:
        recorder = MetricsRecorder(db)
        recorder.record(CallRecord(id=..., provider="openai", model="gpt-5-mini", purpose="fast"))
        await recorder.flush()
    """

    def __init__(
        self,
        db: Database,
        prices: PriceBook | None = None,
        *,
        batch: int = 256,
        price_ttl_secs: float = PRICE_TTL_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self._fixed_prices = prices
        self._prices: PriceBook | None = None
        self._prices_read = 0.0
        self._price_ttl = price_ttl_secs
        self._clock = clock
        self._batch = batch
        self._queue: asyncio.Queue[CallRecord] | None = None
        self._writer: asyncio.Task[None] | None = None

    @property
    def prices(self) -> PriceBook:
        """The price table: the one given, or the database's, read again once it is
        `price_ttl_secs` old, so a price set with `opencrab llm price` (or any other
        process) costs a running server's calls within seconds."""
        if self._fixed_prices is not None:
            return self._fixed_prices
        now = self._clock()
        if self._prices is None or now - self._prices_read >= self._price_ttl:
            with self.db.read() as conn:
                self._prices = PriceBook.load(conn)
            self._prices_read = now
        return self._prices

    def reload_prices(self) -> None:
        """Read the price table again at the next call."""
        self._prices = None

    def record(self, record: CallRecord) -> None:
        """Queue a row; it is written shortly after, in a batch."""
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_forever())
        self._queue.put_nowait(record)

    async def flush(self) -> None:
        """Wait until every queued row is stored."""
        if self._queue is not None:
            await self._queue.join()

    async def aclose(self) -> None:
        """Store what is queued and stop the writer."""
        await self.flush()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None

    async def _write_forever(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            while not queue.empty() and len(batch) < self._batch:
                batch.append(queue.get_nowait())
            try:
                await asyncio.to_thread(self.write, batch)
            except Exception:
                log.exception("could not store %d LLM metrics rows", len(batch))
            finally:
                for _ in batch:
                    queue.task_done()

    def write(self, records: list[CallRecord]) -> None:
        """Store rows now, in one transaction (also usable without an event loop)."""
        with self.db.write() as conn:
            insert_records(conn, records)


def insert_records(conn: Connection, records: list[CallRecord]) -> None:
    """Store call rows inside the caller's transaction (the turn recorder writes a turn's
    calls with their token_usage events); the budget reservations of reserved calls are
    settled in it (the row's cost takes the estimate's place)."""
    metrics_repo.insert(conn, [r.as_row() for r in records])
    reservations.settle(conn, [r.id for r in records if r.reserved])


# ------------------------------------------------------------------ summaries
GROUPS = metrics_repo.GROUP_KEYS
"""Groupings of `summarize`: model, provider, purpose, task_type, agent, and the UTC
date of the call's day or of its week's Monday (day, week) on every database."""
PERIODS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}


def period_start(period: str, now: datetime | None = None) -> datetime | None:
    """Start of a period: hour, day, week, month (30 days), all, or N h/d/w (e.g. 7d)."""
    now = now or datetime.now(UTC)
    if period == "all":
        return None
    if period == "month":
        return now - timedelta(days=30)
    if period in PERIODS:
        return now - PERIODS[period]
    unit = {"h": "hours", "d": "days", "w": "weeks"}.get(period[-1:])
    if unit and period[:-1].isdigit() and int(period[:-1]) > 0:
        return now - timedelta(**{unit: int(period[:-1])})
    raise ValidationError(
        f"unknown period {period!r}: use hour, day, week, month, all, or a count like 24h, 7d, 4w"
    )
