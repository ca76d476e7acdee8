"""The fleet's LLM cost and quality figures: grouped reads over `llm_usage_metrics` and
its daily rollup `llm_usage_daily`.

Every function takes one `UsageFilter` (period, agent, purpose, provider, model, source)
and answers with one grouped query, so the dashboard's charts, its totals and the CSV
export all read the same rows. A filter whose period starts and ends at UTC midnights
(`whole_days`: every filter the routes build) is answered from the rollup (the fleet's,
`llm_usage_fleet_daily`, without an agent in the filter or the grouping), whose sums
equal those of the calls (store/repositories/metrics.py writes both in one
transaction); any other period sums the calls themselves. "Imported" calls are those
the transcript importers wrote (opencrab.importers.store: purpose `import`, one row per
recorded model call); every other row is a live call made through the router. Day and
week keys are UTC dates (store.dialects), a week by its Monday.

Percentiles are nearest-rank (the smallest value with at least p of the values at or
below it). Over many calls (more than EXACT_UP_TO, without an agent or purpose) they
are read from the per-day speed histograms `llm_usage_speed` (metrics_speed.speed_bucket:
log-spaced buckets), within PERCENTILE_ERROR (2 %) of the exact value, which the
Costs page states; otherwise the calls are ranked: PostgreSQL's `percentile_disc` in
SQL, the same rule in Python over a narrow (key, value) fetch on SQLite, which has no
ordered-set aggregates.

These are the fleet's figures over a filter. One agent's usage analysis and its model
suggestions (opencrab.llm.analysis) are computed there instead (the analysis from the
agent's call rows, which keep each call's complexity; the suggestions from the agent's
rollup rows, metrics.task_model_sums): their success rate (returned and not rated a
failed task) is not this module's error count (status other than ok), nor their mean
latency these percentiles; cost (the sum of estimated_cost_usd) and quality (the mean
score of the rated calls) are defined alike in both.

Example:
    flt = UsageFilter(since=datetime(2026, 1, 1, tzinfo=UTC), agent_id="…")
    with db.read() as conn:
        rollup(conn, flt)[0].cost_usd
        cost_series(conn, flt, bucket="day", stack="model")
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.dialects import postgresql, sqlite
from opencrab.store.repositories.metrics import midnight_key, utc_day_key
from opencrab.store.repositories.metrics_speed import bucket_value, speed_bucket
from opencrab.store.tables import llm_usage_daily as daily
from opencrab.store.tables import llm_usage_fleet_daily as fleet_daily
from opencrab.store.tables import llm_usage_metrics as metrics
from opencrab.store.tables import llm_usage_speed as speed_table

IMPORT_PURPOSE = "import"
"""The purpose the importers give the calls they record (see the module docstring)."""

Source = Literal["all", "live", "imported"]
Bucket = Literal["day", "week"]
Stack = Literal["model", "provider", "agent", "purpose"]
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class UsageFilter:
    """Which calls a figure covers; None everywhere: all of them."""

    since: datetime | None = None
    until: datetime | None = None  # exclusive
    agent_id: str | None = None
    purpose: str | None = None
    provider: str | None = None
    model: str | None = None
    source: Source = "all"

    @property
    def whole_days(self) -> bool:
        """True when the period starts and ends at UTC midnights (or is open)."""
        return all(t is None or midnight_key(t) is not None for t in (self.since, self.until))

    def clause(self, table: sa.Table = metrics) -> sa.ColumnElement[bool]:
        """The WHERE clause selecting these calls (`table`: the calls, or the rollup rows
        of their keys when the period is whole days)."""
        m = table.c
        parts: list[sa.ColumnElement[bool]] = []
        if table is not metrics:
            if self.since is not None:
                parts.append(m.day >= utc_day_key(self.since))
            if self.until is not None:
                parts.append(m.day < utc_day_key(self.until))
        else:
            if self.since is not None:
                parts.append(m.timestamp >= self.since)
            if self.until is not None:
                parts.append(m.timestamp < self.until)
        for name, value in (
            ("agent_id", self.agent_id),
            ("purpose", self.purpose),
            ("provider", self.provider),
            ("model", self.model),
        ):
            if value is not None:
                parts.append(m[name] == value)
        if self.source == "imported":
            parts.append(m.purpose == IMPORT_PURPOSE)
        elif self.source == "live":
            parts.append(m.purpose != IMPORT_PURPOSE)
        return sa.and_(sa.true(), *parts)


class SeriesPoint(NamedTuple):
    """One stacked bar: a day or week, one group's cost and calls."""

    bucket: str
    key: str
    cost_usd: float
    calls: int


class Share(NamedTuple):
    """One group's part of the filtered calls."""

    key: str
    calls: int
    cost_usd: float
    total_tokens: int


class QualityPoint(NamedTuple):
    """The average evaluate_response score of a day or week's rated calls."""

    bucket: str
    avg_quality: float
    rated: int


class EfficiencyCell(NamedTuple):
    """Model × task type: calls, their cost, and the average quality of the rated ones."""

    model: str
    task_type: str
    calls: int
    cost_usd: float
    avg_quality: float | None
    rated: int


class Percentiles(NamedTuple):
    """A model's latency and time to first token, nearest-rank p50/p90/p99 (ms)."""

    model: str
    calls: int
    latency: tuple[int, int, int] | None
    ttft: tuple[int, int, int] | None


class ErrorRate(NamedTuple):
    """A provider's calls and failed ones (status other than ok)."""

    provider: str
    calls: int
    errors: int


class ModelRollup(NamedTuple):
    """One provider/model's sums: what the totals, shares, error rates and cache need."""

    provider: str
    model: str
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float


def _dialect(conn: Connection) -> Any:
    return sqlite if conn.dialect.name == "sqlite" else postgresql


class _Source:
    """The calls, or their rollup rows, as the same named sums (see the module docstring):
    the fleet's rollup when neither the filter nor the grouping names an agent."""

    def __init__(self, flt: UsageFilter, *, by_agent: bool = False) -> None:
        if not flt.whole_days:
            self.table = metrics
        elif by_agent or flt.agent_id is not None:
            self.table = daily
        else:
            self.table = fleet_daily
        self.rolled = self.table is not metrics
        self.where = flt.clause(self.table)
        c = self.table.c
        self.c = c
        self.task_type = sa.func.nullif(c.task_type, "") if self.rolled else c.task_type

    def key(self, stack: Stack) -> Any:
        """The column of a grouping (STACK_COLUMNS). The agent over the per-agent rollup is
        an expression of the same value (agent ids are never NULL), so SQLite reads the
        period's rows along the day and sorts them instead of walking the whole
        (agent_id, day) index to save the sort: a month of a large rollup in milliseconds."""
        column = self.c[STACK_COLUMNS[stack]]
        if stack == "agent" and self.table is daily:
            return sa.func.coalesce(column, "")
        return column

    def calls(self) -> Any:
        """The number of calls."""
        return sa.func.sum(self.c.calls) if self.rolled else sa.func.count()

    def errors(self) -> Any:
        """The number of calls whose status is not ok."""
        counted = self.c.calls if self.rolled else 1
        return sa.func.sum(sa.case((self.c.status == "ok", 0), else_=counted))

    def total(self, name: str) -> Any:
        """SUM of a column of the calls (estimated_cost_usd, input_tokens, …)."""
        if self.rolled and name == "estimated_cost_usd":
            name = "cost_usd"
        return sa.func.sum(self.c[name])

    def rated(self) -> Any:
        """The number of calls with a quality score."""
        c = self.c
        return sa.func.sum(c.quality_count) if self.rolled else sa.func.count(c.quality_score)

    def avg_quality(self) -> Any:
        """The average quality score of the rated calls (NULL without any)."""
        c = self.c
        if not self.rolled:
            return sa.func.avg(c.quality_score)
        rated = sa.func.sum(c.quality_count)
        return sa.case((rated > 0, sa.func.sum(c.quality_sum) / rated))

    def has_quality(self) -> sa.ColumnElement[bool]:
        """The rows holding rated calls."""
        c = self.c
        return c.quality_count > 0 if self.rolled else c.quality_score.is_not(None)

    def bucket(self, conn: Connection, bucket: Bucket) -> Any:
        """The UTC day (or its week's Monday) of the calls, `YYYY-MM-DD`."""
        dialect = _dialect(conn)
        if self.rolled:
            return self.c.day if bucket == "day" else dialect.utc_week_of_day(self.c.day)
        keyed = dialect.utc_day if bucket == "day" else dialect.utc_week
        return keyed(self.c.timestamp)


STACK_COLUMNS = {
    "model": "model",
    "provider": "provider",
    "agent": "agent_id",
    "purpose": "purpose",
}


def _ok() -> sa.ColumnElement[bool]:
    return metrics.c.status == "ok"


def rollup(conn: Connection, flt: UsageFilter) -> list[ModelRollup]:
    """Sums per provider/model in one pass: the page's totals and tables come from it."""
    src = _Source(flt)
    m = src.c
    sums = (
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    )
    query = (
        sa.select(
            m.provider,
            m.model,
            src.calls(),
            src.errors(),
            *(src.total(c) for c in sums),
            src.total("estimated_cost_usd"),
        )
        .where(src.where)
        .group_by(m.provider, m.model)
        .order_by(m.provider, m.model)
    )
    out = []
    for provider, model, calls, errors, inputs, outputs, tokens, read, write, cost in conn.execute(
        query
    ):
        out.append(
            ModelRollup(
                str(provider),
                str(model),
                int(calls),
                int(errors or 0),
                int(inputs or 0),
                int(outputs or 0),
                int(tokens or 0),
                int(read or 0),
                int(write or 0),
                float(cost or 0.0),
            )
        )
    return out


def cost_series(
    conn: Connection, flt: UsageFilter, *, bucket: Bucket, stack: Stack
) -> list[SeriesPoint]:
    """Cost and calls per day or week and per group, oldest first."""
    src = _Source(flt, by_agent=stack == "agent")
    key = src.key(stack).label("key")
    when = src.bucket(conn, bucket).label("bucket")
    query = (
        sa.select(when, key, src.total("estimated_cost_usd"), src.calls().label("calls"))
        .where(src.where)
        .group_by(when, key)
        .order_by(when, key)
    )
    return [
        SeriesPoint(str(b), str(k), float(c or 0.0), int(n)) for b, k, c, n in conn.execute(query)
    ]


def shares(conn: Connection, flt: UsageFilter, *, by: Stack = "model") -> list[Share]:
    """Each group's calls, cost and tokens, most expensive first."""
    src = _Source(flt, by_agent=by == "agent")
    key = src.key(by).label("key")
    cost = src.total("estimated_cost_usd").label("cost")
    query = (
        sa.select(key, src.calls(), cost, src.total("total_tokens"))
        .where(src.where)
        .group_by(key)
        .order_by(sa.desc("cost"), key)
    )
    return [
        Share(str(k), int(n), float(c or 0.0), int(t or 0)) for k, n, c, t in conn.execute(query)
    ]


def quality_series(conn: Connection, flt: UsageFilter, *, bucket: Bucket) -> list[QualityPoint]:
    """Average quality score of the rated calls per day or week, oldest first."""
    src = _Source(flt)
    when = src.bucket(conn, bucket).label("bucket")
    query = (
        sa.select(when, src.avg_quality(), src.rated())
        .where(src.where, src.has_quality())
        .group_by(when)
        .order_by(when)
    )
    return [QualityPoint(str(b), float(q), int(n)) for b, q, n in conn.execute(query)]


def efficiency(conn: Connection, flt: UsageFilter) -> list[EfficiencyCell]:
    """Model × task type (the purpose when a call has none): calls, cost, quality."""
    src = _Source(flt)
    m = src.c
    task = sa.func.coalesce(src.task_type, m.purpose).label("task")
    query = (
        sa.select(
            m.model,
            task,
            src.calls(),
            src.total("estimated_cost_usd"),
            src.avg_quality(),
            src.rated(),
        )
        .where(src.where)
        .group_by(m.model, task)
        .order_by(m.model, task)
    )
    return [
        EfficiencyCell(
            str(mo), str(t), int(n), float(c or 0.0), None if q is None else float(q), int(r)
        )
        for mo, t, n, c, q, r in conn.execute(query)
    ]


def nearest_rank(ordered: list[int], p: float) -> int:
    """The nearest-rank percentile of sorted values (percentile_disc)."""
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def _percentiles_sql(conn: Connection, flt: UsageFilter, column: str) -> dict[str, tuple[int, ...]]:
    m = metrics.c
    value = m[column]
    cols = [sa.func.percentile_disc(p).within_group(value.asc()) for p in PERCENTILES]
    query = (
        sa.select(m.model, *cols).where(flt.clause(), _ok(), value.is_not(None)).group_by(m.model)
    )
    return {str(row[0]): tuple(int(v) for v in row[1:]) for row in conn.execute(query)}


def _percentiles_python(
    conn: Connection, flt: UsageFilter, column: str
) -> dict[str, tuple[int, ...]]:
    m = metrics.c
    value = m[column]
    query = (
        sa.select(m.model, value)
        .where(flt.clause(), _ok(), value.is_not(None))
        .order_by(m.model, value)
    )
    values: dict[str, list[int]] = defaultdict(list)
    for model, v in conn.execute(query):
        values[str(model)].append(int(v))
    return {k: tuple(nearest_rank(vs, p) for p in PERCENTILES) for k, vs in values.items()}


EXACT_UP_TO = 20_000
"""`speed` ranks the calls themselves when the filter selects at most this many
successful calls (or one agent's, or one purpose's): exact, and fast at that size."""


class HistogramBucket(NamedTuple):
    """One histogram bucket of a group's calls: its number, calls, smallest and largest."""

    bucket: int
    calls: int
    low: int
    high: int


Histograms = dict[tuple[str, str], list[HistogramBucket]]
"""(group, metric) → the group's buckets of that metric (latency | ttft), in order."""


def _edges(flt: UsageFilter) -> tuple[str | None, str | None, list[tuple[Any, Any]]]:
    """The whole UTC days of the filter's period as day keys [first, last) (None: open),
    and the parts of days at its ends as (since, until) periods to read from the calls."""
    since, until = flt.since, flt.until
    first = None if since is None else utc_day_key(since)
    last = None if until is None else utc_day_key(until)
    edges: list[tuple[Any, Any]] = []
    if since is not None and midnight_key(since) is None:
        start = since.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        following = start + timedelta(days=1)
        if until is not None and until <= following:
            return first, first, [(since, until)]  # within one day: no whole day
        edges.append((since, following))
        first = utc_day_key(following)
    if until is not None and midnight_key(until) is None:
        start = until.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        edges.append((start, until))
    return first, last, edges


def speed_histograms(
    conn: Connection,
    flt: UsageFilter,
    *,
    by: Literal["model", "provider"],
    metric: Literal["latency", "ttft"] | None = None,
) -> Histograms:
    """The successful calls' latency and TTFT histograms (only `metric`'s when given) per
    model or provider over a filter without an agent or purpose (the histograms keep
    neither): the stored per-day rows of its whole UTC days, and the calls of the parts
    of days at its ends counted into the same buckets."""
    if flt.agent_id is not None or flt.purpose is not None:
        raise ValueError("the speed histograms hold no agent or purpose")
    h = speed_table.c
    first, last, edges = _edges(flt)
    where: list[sa.ColumnElement[bool]] = []
    for column, value in ((h.provider, flt.provider), (h.model, flt.model)):
        if value is not None:
            where.append(column == value)
    if flt.source != "all":
        where.append(h.source == flt.source)
    if metric is not None:
        where.append(h.metric == metric)
    merged: dict[tuple[str, str, int], list[int]] = {}
    if first is None or last is None or first < last:
        days = [h.day >= first] if first is not None else []
        days += [h.day < last] if last is not None else []
        group = h[by]
        query = (
            sa.select(
                group,
                h.metric,
                h.bucket,
                sa.func.sum(h.calls),
                sa.func.min(h.min_ms),
                sa.func.max(h.max_ms),
            )
            .where(*where, *days)
            .group_by(group, h.metric, h.bucket)
        )
        for key, name, bucket, calls, low, high in conn.execute(query):
            merged[(str(key), str(name), int(bucket))] = [int(calls), int(low), int(high)]
    m = metrics.c
    for since, until in edges:
        part = UsageFilter(since, until, None, None, flt.provider, flt.model, flt.source)
        edge = sa.select(m[by], m.latency_ms, m.time_to_first_token_ms).where(part.clause(), _ok())
        for row in conn.execute(edge):
            key, values = row[0], (("latency", row[1]), ("ttft", row[2]))
            for name, value in values:
                if value is None or metric not in (None, name):
                    continue
                v = int(value)
                had = merged.setdefault((str(key), name, speed_bucket(v)), [0, v, v])
                had[0] += 1
                had[1], had[2] = min(had[1], v), max(had[2], v)
    out: Histograms = defaultdict(list)
    for (key, name, bucket), (calls, low, high) in sorted(merged.items()):
        out[(key, name)].append(HistogramBucket(bucket, calls, low, high))
    return dict(out)


def histogram_rank(buckets: list[HistogramBucket], p: float) -> int:
    """The nearest-rank percentile p of a histogram's values, within PERCENTILE_ERROR of
    the exact one: the value of the bucket holding the value of that rank."""
    total = sum(b.calls for b in buckets)
    rank = max(1, math.ceil(p * total))
    seen = 0
    for b in buckets:
        seen += b.calls
        if seen >= rank:
            return bucket_value(b.bucket, b.low, b.high)
    raise ValueError("an empty histogram has no percentile")


def speed(conn: Connection, flt: UsageFilter, *, exact: bool | None = None) -> list[Percentiles]:
    """Per model: successful calls' latency and TTFT p50/p90/p99 (TTFT of streamed calls).

    `exact` True ranks the calls themselves; False reads the speed histograms (within
    PERCENTILE_ERROR); None (the routes) ranks the calls when the filter names an agent
    or a purpose or selects at most EXACT_UP_TO successful calls, else the histograms.
    """
    if exact or flt.agent_id is not None or flt.purpose is not None:
        return _speed_exact(conn, flt)
    found = speed_histograms(conn, flt, by="model")
    counts = {k: sum(b.calls for b in bs) for (k, m), bs in found.items() if m == "latency"}
    if exact is None and sum(counts.values()) <= EXACT_UP_TO:
        return _speed_exact(conn, flt)

    def ranks(key: str, metric: str) -> tuple[int, int, int] | None:
        buckets = found.get((key, metric))
        if not buckets:
            return None
        p50, p90, p99 = (histogram_rank(buckets, p) for p in PERCENTILES)
        return p50, p90, p99

    return [
        Percentiles(model, n, ranks(model, "latency"), ranks(model, "ttft"))
        for model, n in sorted(counts.items())
    ]


def _speed_exact(conn: Connection, flt: UsageFilter) -> list[Percentiles]:
    pick = _percentiles_python if conn.dialect.name == "sqlite" else _percentiles_sql
    latency = pick(conn, flt, "latency_ms")
    ttft = pick(conn, flt, "time_to_first_token_ms")
    m = metrics.c
    counts = conn.execute(
        sa.select(m.model, sa.func.count()).where(flt.clause(), _ok()).group_by(m.model)
    ).all()
    out = []
    for model, n in sorted(counts, key=lambda r: str(r[0])):
        lat, first = latency.get(str(model)), ttft.get(str(model))
        out.append(
            Percentiles(
                str(model),
                int(n),
                None if lat is None else (lat[0], lat[1], lat[2]),
                None if first is None else (first[0], first[1], first[2]),
            )
        )
    return out


_AGENTS = sa.text(
    "WITH RECURSIVE a(id) AS (SELECT MIN(agent_id) FROM llm_usage_daily UNION ALL "
    "SELECT (SELECT MIN(agent_id) FROM llm_usage_daily WHERE agent_id > a.id) FROM a "
    "WHERE a.id IS NOT NULL) SELECT id FROM a WHERE id IS NOT NULL"
)
"""The distinct agents of the rollup, one index seek each along its (agent_id, day)
index instead of a read of every row."""


def choices(conn: Connection) -> dict[str, list[str]]:
    """The distinct agents and purposes stored, for the filter bar (from the rollups)."""
    purposes = conn.execute(sa.select(fleet_daily.c.purpose).distinct()).scalars()
    return {
        "agents": sorted(str(v) for v in conn.execute(_AGENTS).scalars()),
        "purposes": sorted(str(v) for v in purposes),
    }
