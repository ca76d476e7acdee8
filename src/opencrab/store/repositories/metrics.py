"""LLM usage metrics (`llm_usage_metrics`, one row per call attempt), their daily rollups
(`llm_usage_daily`, the fleet's `llm_usage_fleet_daily`, the budgets'
`llm_usage_agent_daily`) and the price table (`model_pricing`) that costs them: inserts,
the aggregate queries, re-costing.

This module is the only writer of the calls and their daily rollups: every insert,
re-pricing (`set_costs`) and rating (`evaluate`) of calls adds the same change to the
rollup rows of their keys (UTC day × agent × provider × model × purpose × task type ×
status) in the same transaction, with an adding upsert (store/dialects.accumulate), so a
key's sums always equal SQL over its calls and concurrent writers never lose each
other's part. An insert also counts the calls into the speed histograms
(store/repositories/metrics_speed.py, their writer) in that transaction. The row's
shape (`MetricRow`, `COLUMNS`) is store/repositories/metric_rows.py's.

Every function runs on the caller's connection, inside the caller's transaction. Day and
week keys are UTC dates on every database (`store.dialects.<name>.utc_day/utc_week`).

Example:
    with db.write() as conn:
        insert(conn, [record.as_row()])
    with db.read() as conn:
        by_day = group_totals(conn, "day", since=None, agent_id=None)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.bulk import bulk_insert
from opencrab.store.dialects import accumulate, postgresql, sqlite
from opencrab.store.prepared import Prepared
from opencrab.store.repositories.metric_rows import AT, chunks
from opencrab.store.repositories.metric_rows import COLUMNS as COLUMNS
from opencrab.store.repositories.metric_rows import MetricRow as MetricRow
from opencrab.store.repositories.metrics_speed import accumulate_speed, speed_counts
from opencrab.store.tables import llm_usage_agent_daily as agent_daily
from opencrab.store.tables import llm_usage_daily as daily
from opencrab.store.tables import llm_usage_fleet_daily as fleet_daily
from opencrab.store.tables import llm_usage_metrics as metrics
from opencrab.store.tables import model_pricing

GROUP_KEYS = ("model", "provider", "purpose", "task_type", "agent", "day", "week")
"""What `group_totals` groups by; day and week are UTC dates (a week by its Monday)."""


class GroupTotals(NamedTuple):
    """Totals of one group of calls."""

    key: str | None
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float
    avg_latency_ms: float | None
    avg_ttft_ms: float | None
    avg_quality: float | None


class CallTotals(NamedTuple):
    """An agent's calls, failed ones, tokens and cost in a period."""

    calls: int
    errors: int
    total_tokens: int
    cost_usd: float


class PriceRow(NamedTuple):
    """One row of the price table ($ per 1M tokens)."""

    provider: str
    model: str
    input_price_per_1m: float
    output_price_per_1m: float
    context_window: int | None
    cache_read_price_per_1m: float | None
    cache_write_price_per_1m: float | None


class CostInputs(NamedTuple):
    """What re-costing one stored call needs."""

    id: str
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


# ------------------------------------------------------------------ calls
def insert(conn: Connection, rows: Sequence[MetricRow]) -> None:
    """Store call rows with one executemany, and add them to the daily rollups and the
    speed histograms."""
    bulk_insert(conn, metrics, COLUMNS, rows)
    days = [utc_day_key(r.timestamp) for r in rows]
    _accumulate(conn, _daily_sums(rows, days))
    accumulate_speed(conn, speed_counts(rows, days))


def stored_ids(conn: Connection, ids: Sequence[str], *, per_query: int = 500) -> set[str]:
    """Those of `ids` already stored, looked up `per_query` at a time."""
    found: set[str] = set()
    for start in range(0, len(ids), per_query):
        part = ids[start : start + per_query]
        found.update(conn.scalars(sa.select(metrics.c.id).where(metrics.c.id.in_(part))))
    return found


def insert_bound(conn: Connection, rows: Sequence[MetricRow], stamps: Sequence[str]) -> None:
    """`insert` of rows whose timestamps the caller already holds in storage form:
    `stamps[i]` is `format_timestamp(rows[i].timestamp)` and each row's created_at is its
    timestamp (a call's time, as `CallRecord.as_row` gives). The rows go to the driver
    as they are (`bulk_insert`'s `bound`): on SQLite with the stamps in place of both
    datetimes, elsewhere with the aware datetimes; the UTC day is the stamp's date. An
    import's many calls are not converted again value by value."""
    if any(r.created_at != r.timestamp for r in rows):
        raise ValueError("insert_bound stores rows whose created_at is their timestamp")
    if conn.dialect.name == "sqlite":
        # timestamp and created_at (the row's last column) as the stamp
        bound: Sequence[Sequence[Any]] = [
            (*r[:_TIMESTAMP], s, *r[_TIMESTAMP + 1 : -1], s)
            for r, s in zip(rows, stamps, strict=True)
        ]
    else:
        bound = rows
    bulk_insert(conn, metrics, COLUMNS, bound, bound=True)
    days = [s[:10] for s in stamps]
    _accumulate(conn, _daily_sums(rows, days))
    accumulate_speed(conn, speed_counts(rows, days))


_TIMESTAMP = COLUMNS.index("timestamp")


# ------------------------------------------------------------------ the daily rollup
DAILY_KEYS = ("day", "agent_id", "provider", "model", "purpose", "task_type", "status")
"""The rollup's key; task_type "" stands for a call without one."""
DAILY_SUMS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_usd",
    "quality_sum",
    "quality_count",
    "latency_ms_sum",
    "ttft_ms_sum",
    "ttft_count",
    "failed_tasks",
)
"""What each rollup row sums over its calls (quality and TTFT: of the calls that have one;
failed_tasks: the calls rated a failed task, task_success false — revision 0046)."""
_COST = DAILY_SUMS.index("cost_usd")
_QUALITY = DAILY_SUMS.index("quality_sum")
_FAILED = DAILY_SUMS.index("failed_tasks")


def utc_day_key(moment: datetime) -> str:
    """`YYYY-MM-DD` of a call's UTC day: the rollup's day (store.dialects.*.utc_day)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def midnight_key(moment: datetime) -> str | None:
    """The day key of a UTC midnight; None for any other moment (the rollup cannot tell
    which of a day's calls came before it)."""
    at = moment.astimezone(UTC)
    if (at.hour, at.minute, at.second, at.microsecond) != (0, 0, 0, 0):
        return None
    return at.strftime("%Y-%m-%d")


def daily_key(
    moment: datetime,
    agent_id: str,
    provider: str,
    model: str,
    purpose: str,
    task_type: str | None,
    status: str,
) -> tuple[str, ...]:
    """The rollup key of one call."""
    return (utc_day_key(moment), str(agent_id), provider, model, purpose, task_type or "", status)


def _add(
    sums: dict[tuple[str, ...], list[Any]], key: tuple[str, ...], values: Sequence[Any]
) -> None:
    had = sums.get(key)
    if had is None:
        sums[key] = list(values)
    else:
        for i, v in enumerate(values):
            had[i] += v


def _daily_sums(
    rows: Sequence[Sequence[Any]], days: Sequence[str]
) -> dict[tuple[str, ...], list[Any]]:
    """What rows (values in COLUMNS order, as stored or as bound) add to the rollup,
    `days[i]` the UTC day key of row i: DAILY_SUMS by rollup key (`daily_key`)."""
    agent, provider, model, purpose, task_type, status, quality_at, ttft_at, latency, done = (
        AT[n] for n in _KEY_AND_AVERAGED
    )
    summed = itemgetter(*(AT[n] for n in _SUMMED))
    sums: dict[tuple[str, ...], list[Any]] = {}
    for r, day in zip(rows, days, strict=True):
        key = (day, str(r[agent]), r[provider], r[model], r[purpose], r[task_type] or "", r[status])
        quality, ttft = r[quality_at], r[ttft_at]
        _add(
            sums,
            key,
            (
                1,
                *summed(r),
                0.0 if quality is None else quality,
                0 if quality is None else 1,
                r[latency],
                0 if ttft is None else ttft,
                0 if ttft is None else 1,
                _failed(r[done]),
            ),
        )
    return sums


_KEY_AND_AVERAGED = (
    "agent_id",
    "provider",
    "model",
    "purpose",
    "task_type",
    "status",
    "quality_score",
    "time_to_first_token_ms",
    "latency_ms",
    "task_success",
)
_SUMMED = (*DAILY_SUMS[1:_COST], "estimated_cost_usd")
"""The columns `_daily_sums` sums as they are, in DAILY_SUMS order after `calls` (the
token sums share their column's name; cost_usd sums estimated_cost_usd)."""


def _failed(task_success: Any) -> int:
    """1 for a call rated a failed task (task_success false, 0 as some drivers read it)."""
    return 0 if task_success is None or task_success else 1


def _upsert(count: int) -> Prepared:
    found = _UPSERTS.get(count)
    if found is None:
        names = DAILY_KEYS + DAILY_SUMS
        rows: list[dict[str, Any]] = [
            {n: sa.bindparam(f"{n}_{i}") for n in names} for i in range(count)
        ]
        found = _UPSERTS[count] = Prepared(lambda d: accumulate(d, daily, DAILY_KEYS, rows))
    return found


_UPSERTS: dict[int, Prepared] = {}


def _accumulate(conn: Connection, sums: dict[tuple[str, ...], list[Any]]) -> None:
    """Add `sums` to the rollup rows of their keys (created when missing), in key order so
    two writers take the rows' locks in the same order; and the same sums without the
    agent to the fleet's rollup (`llm_usage_fleet_daily`), the calls and cost by day,
    agent and task type to the budgets' (`llm_usage_agent_daily`)."""
    _add_sums(conn, sums, _upsert)
    fleet: dict[tuple[str, ...], list[Any]] = {}
    agents: dict[tuple[str, ...], list[Any]] = {}
    for key, values in sums.items():
        _add(fleet, (key[0], *key[2:]), values)
        _add(agents, (key[0], key[1], key[5]), (values[0], values[_COST]))
    _add_sums(conn, fleet, _fleet_upsert)
    keys = sorted(agents)
    for start, count in chunks(len(keys)):
        params: dict[str, Any] = {}
        for i, key in enumerate(keys[start : start + count]):
            row = (*key, *agents[key])
            params.update({f"{n}_{i}": v for n, v in zip(AGENT_COLUMNS, row, strict=True)})
        _agent_upsert(count).run(conn, **params)


def _agent_upsert(count: int) -> Prepared:
    found = _AGENT_UPSERTS.get(count)
    if found is None:
        rows: list[dict[str, Any]] = [
            {n: sa.bindparam(f"{n}_{i}") for n in AGENT_COLUMNS} for i in range(count)
        ]
        found = _AGENT_UPSERTS[count] = Prepared(
            lambda d: accumulate(d, agent_daily, AGENT_COLUMNS[:3], rows)
        )
    return found


_AGENT_UPSERTS: dict[int, Prepared] = {}


def _fleet_upsert(count: int) -> Prepared:
    found = _FLEET_UPSERTS.get(count)
    if found is None:
        names = FLEET_KEYS + DAILY_SUMS
        rows: list[dict[str, Any]] = [
            {n: sa.bindparam(f"{n}_{i}") for n in names} for i in range(count)
        ]
        found = _FLEET_UPSERTS[count] = Prepared(
            lambda d: accumulate(d, fleet_daily, FLEET_KEYS, rows)
        )
    return found


_FLEET_UPSERTS: dict[int, Prepared] = {}
AGENT_COLUMNS = ("day", "agent_id", "task_type", "calls", "cost_usd")
"""The budgets' rollup (`llm_usage_agent_daily`): its key, then its sums."""
FLEET_KEYS = tuple(k for k in DAILY_KEYS if k != "agent_id")
"""The fleet rollup's key: the daily rollup's without the agent."""


def _add_sums(
    conn: Connection, sums: dict[tuple[str, ...], list[Any]], upsert: Callable[[int], Prepared]
) -> None:
    keys = sorted(sums)
    width = len(next(iter(sums))) if sums else 0
    names = DAILY_KEYS if width == len(DAILY_KEYS) else FLEET_KEYS
    for start, count in chunks(len(keys)):
        params: dict[str, Any] = {}
        for i, key in enumerate(keys[start : start + count]):
            params.update({f"{n}_{i}": v for n, v in zip(names, key, strict=True)})
            params.update({f"{n}_{i}": v for n, v in zip(DAILY_SUMS, sums[key], strict=True)})
        upsert(count).run(conn, **params)


def _zeros() -> list[Any]:
    return [0] * len(DAILY_SUMS)


def _locked_keys(conn: Connection, ids: Sequence[str], *columns: sa.Column[Any]) -> list[Any]:
    """(id, rollup key, (`columns`)) of these calls, locked until the transaction ends."""
    m = metrics.c
    query = (
        sa.select(
            m.id,
            m.timestamp,
            m.agent_id,
            m.provider,
            m.model,
            m.purpose,
            m.task_type,
            m.status,
            *columns,
        )
        .where(m.id.in_(list(ids)))
        .with_for_update()
    )
    return [(str(row[0]), daily_key(*row[1:8]), tuple(row[8:])) for row in conn.execute(query)]


def _key(conn: Connection, group_by: str) -> sa.ColumnElement[Any]:
    m = metrics.c
    if group_by == "agent":
        return m.agent_id
    if group_by in ("day", "week"):
        dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
        keyed = dialect.utc_day if group_by == "day" else dialect.utc_week
        return keyed(m.timestamp)  # type: ignore[no-any-return]
    if group_by not in GROUP_KEYS:
        raise ValueError(f"unknown grouping {group_by!r}")
    return m[group_by]


def group_totals(
    conn: Connection, group_by: str, *, since: datetime | None, agent_id: str | None
) -> list[GroupTotals]:
    """Calls, errors, tokens, cost and speed per group (GROUP_KEYS), most expensive first.

    One agent's are summed over its calls; the fleet's over the rollup (the fleet's,
    or the per-agent one grouped by agent) for the whole UTC days from `since` on, plus
    the calls of the part of a day before its first midnight: the same sums, and the
    means as their quotients."""
    if agent_id is not None:
        return _totals_of(conn.execute(_raw_totals(conn, group_by, since, None, agent_id)))
    first, edge = since, None
    if since is not None and midnight_key(since) is None:
        start = since.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        first = start + _DAY
        edge = _raw_totals(conn, group_by, since, first, None)
    table = daily if group_by == "agent" else fleet_daily
    c = table.c
    if group_by == "agent":
        key: Any = c.agent_id
    elif group_by == "day":
        key = c.day
    elif group_by == "week":
        key = (sqlite if conn.dialect.name == "sqlite" else postgresql).utc_week_of_day(c.day)
    elif group_by == "task_type":
        key = sa.func.nullif(c.task_type, "")
    elif group_by in GROUP_KEYS:
        key = c[group_by]
    else:
        raise ValueError(f"unknown grouping {group_by!r}")
    ok = c.status == "ok"
    rolled = sa.select(
        key.label("key"),
        sa.func.sum(c.calls),
        sa.func.sum(sa.case((ok, 0), else_=c.calls)),
        sa.func.sum(c.input_tokens),
        sa.func.sum(c.output_tokens),
        sa.func.sum(c.total_tokens),
        sa.func.sum(c.cost_usd),
        sa.func.sum(sa.case((ok, c.latency_ms_sum), else_=0)),
        sa.func.sum(sa.case((ok, c.calls), else_=0)),
        sa.func.sum(c.ttft_ms_sum),
        sa.func.sum(c.ttft_count),
        sa.func.sum(c.quality_sum),
        sa.func.sum(c.quality_count),
    ).group_by(key)
    if first is not None:
        rolled = rolled.where(c.day >= utc_day_key(first))
    parts = [conn.execute(rolled)] + ([] if edge is None else [conn.execute(edge)])
    return _totals_of(*parts)


_DAY = timedelta(days=1)


def _raw_totals(
    conn: Connection,
    group_by: str,
    since: datetime | None,
    until: datetime | None,
    agent_id: str | None,
) -> sa.Select[Any]:
    """The sums `_totals_of` reads, over the calls themselves."""
    m = metrics.c
    key = _key(conn, group_by).label("key")
    ok = m.status == "ok"
    query = sa.select(
        key,
        sa.func.count(),
        sa.func.sum(sa.case((ok, 0), else_=1)),
        sa.func.sum(m.input_tokens),
        sa.func.sum(m.output_tokens),
        sa.func.sum(m.total_tokens),
        sa.func.sum(m.estimated_cost_usd),
        sa.func.sum(sa.case((ok, m.latency_ms), else_=0)),
        sa.func.sum(sa.case((ok, 1), else_=0)),
        sa.func.sum(m.time_to_first_token_ms),
        sa.func.count(m.time_to_first_token_ms),
        sa.func.sum(m.quality_score),
        sa.func.count(m.quality_score),
    ).group_by(key)
    if since is not None:
        query = query.where(m.timestamp >= since)
    if until is not None:
        query = query.where(m.timestamp < until)
    if agent_id is not None:
        query = query.where(m.agent_id == agent_id)
    return query


def _totals_of(*parts: Iterable[Sequence[Any]]) -> list[GroupTotals]:
    """GroupTotals from rows of (key, calls, errors, input, output, total tokens, cost,
    ok latency sum, ok calls, TTFT sum, TTFT count, quality sum, rated), adding up rows of
    the same key; most expensive first, then by key."""
    sums: dict[str | None, list[float]] = {}
    for part in parts:
        for row in part:
            key = None if row[0] is None else str(row[0])
            values = [0.0 if x is None else float(x) for x in row[1:]]
            had = sums.get(key)
            if had is None:
                sums[key] = values
            else:
                for i, x in enumerate(values):
                    had[i] += x
    out = []
    for key, got in sums.items():
        calls, errors, inputs, outputs, tokens, cost, lat, ok, ttft, timed, quality, rated = got
        out.append(
            GroupTotals(
                key=key,
                calls=int(calls),
                errors=int(errors),
                input_tokens=int(inputs),
                output_tokens=int(outputs),
                total_tokens=int(tokens),
                cost_usd=float(cost),
                avg_latency_ms=float(lat) / ok if ok else None,
                avg_ttft_ms=float(ttft) / timed if timed else None,
                avg_quality=float(quality) / rated if rated else None,
            )
        )
    out.sort(key=lambda g: (-g.cost_usd, g.key is None, g.key or ""))
    return out


class TaskModelSums(NamedTuple):
    """An agent's calls of one task type (its purpose when it has none), purpose and
    provider/model: what `optimize_model_selection` weighs (opencrab.llm.analysis)."""

    task: str
    purpose: str
    provider: str
    model: str
    calls: int
    cost_usd: float
    ok_calls: int
    ok_latency_ms: int
    rated: int
    quality_sum: float
    succeeded: int  # returned (status ok) and not rated a failed task
    total_tokens: int


_SUM_NAMES = TaskModelSums._fields[4:]


def task_model_sums(conn: Connection, agent_id: str, *, since: datetime) -> list[TaskModelSums]:
    """An agent's calls since `since` summed per task type, purpose and provider/model, in
    that order (`fleet_task_model_sums` of one agent)."""
    return fleet_task_model_sums(conn, since=since, agent_id=agent_id).get(agent_id, [])


def fleet_task_model_sums(
    conn: Connection, *, since: datetime, agent_id: str | None = None
) -> dict[str, list[TaskModelSums]]:
    """Each agent's (or only `agent_id`'s) calls since `since` summed per task type,
    purpose and provider/model, in that order: the per-agent rollup's rows of the whole
    UTC days from `since` on and the calls of the part of a day before its first
    midnight (as `group_totals` reads them), added up in one query — the sums
    `calls_task_model_sums` gives over the calls."""
    c = daily.c
    ok = c.status == "ok"
    first = since
    parts: list[sa.Select[Any]] = []
    if midnight_key(since) is None:
        first = since.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + _DAY
        parts.append(_calls_sums(agent_id, since, first))
    task = sa.func.coalesce(sa.func.nullif(c.task_type, ""), c.purpose)
    rolled = sa.select(
        c.agent_id,
        task.label("task"),
        c.purpose,
        c.provider,
        c.model,
        *(
            sa.func.sum(value).label(name)
            for name, value in zip(
                _SUM_NAMES,
                (
                    c.calls,
                    c.cost_usd,
                    sa.case((ok, c.calls), else_=0),
                    sa.case((ok, c.latency_ms_sum), else_=0),
                    c.quality_count,
                    c.quality_sum,
                    sa.case((ok, c.calls - c.failed_tasks), else_=0),
                    c.total_tokens,
                ),
                strict=True,
            )
        ),
    ).where(c.day >= utc_day_key(first))
    if agent_id is not None:
        rolled = rolled.where(c.agent_id == agent_id)
    rolled = rolled.group_by(c.agent_id, task, c.purpose, c.provider, c.model)
    keys: list[Any]
    if parts:
        both = sa.union_all(rolled, *parts).subquery()
        keys = [both.c[n] for n in ("agent_id", *TaskModelSums._fields[:4])]
        query = sa.select(*keys, *(sa.func.sum(both.c[n]) for n in _SUM_NAMES)).group_by(*keys)
    else:
        query, keys = rolled, [*rolled.selected_columns][:5]
    return _by_agent(conn.execute(query.order_by(*keys)))


def calls_task_model_sums(
    conn: Connection, agent_id: str, *, since: datetime
) -> list[TaskModelSums]:
    """`task_model_sums` over the calls themselves: one grouped query along the
    (agent_id, timestamp) index (what the rollup's figures equal)."""
    query = _calls_sums(agent_id, since, None)
    found = _by_agent(conn.execute(query.order_by(*query.selected_columns[:5])))
    return found.get(agent_id, [])


def _calls_sums(agent_id: str | None, since: datetime, until: datetime | None) -> sa.Select[Any]:
    m = metrics.c
    ok = m.status == "ok"
    task = sa.func.coalesce(sa.func.nullif(m.task_type, ""), m.purpose)
    succeeded = sa.and_(ok, sa.or_(m.task_success.is_(None), m.task_success.is_(True)))
    query = sa.select(
        m.agent_id,
        task.label("task"),
        m.purpose,
        m.provider,
        m.model,
        *(
            value.label(name)
            for name, value in zip(
                _SUM_NAMES,
                (
                    sa.func.count(),
                    sa.func.sum(m.estimated_cost_usd),
                    sa.func.sum(sa.case((ok, 1), else_=0)),
                    sa.func.sum(sa.case((ok, m.latency_ms), else_=0)),
                    sa.func.count(m.quality_score),
                    sa.func.sum(m.quality_score),
                    sa.func.sum(sa.case((succeeded, 1), else_=0)),
                    sa.func.sum(m.total_tokens),
                ),
                strict=True,
            )
        ),
    ).where(m.timestamp >= since)
    if agent_id is not None:
        query = query.where(m.agent_id == agent_id)
    if until is not None:
        query = query.where(m.timestamp < until)
    return query.group_by(m.agent_id, task, m.purpose, m.provider, m.model)


def _by_agent(rows: Iterable[Sequence[Any]]) -> dict[str, list[TaskModelSums]]:
    """Rows of (agent, TaskModelSums' values) as each agent's TaskModelSums, in order."""
    found: dict[str, list[TaskModelSums]] = {}
    for r in rows:
        found.setdefault(str(r[0]), []).append(
            TaskModelSums(
                str(r[1]),
                str(r[2]),
                str(r[3]),
                str(r[4]),
                int(r[5]),
                float(r[6] or 0.0),
                int(r[7] or 0),
                int(r[8] or 0),
                int(r[9] or 0),
                float(r[10] or 0.0),
                int(r[11] or 0),
                int(r[12] or 0),
            )
        )
    return found


def first_call(conn: Connection, agent_id: str, *, since: datetime) -> datetime | None:
    """The time of the agent's first call since `since` (None without any): one step
    along the (agent_id, timestamp) index."""
    m = metrics.c
    query = sa.select(sa.func.min(m.timestamp)).where(m.agent_id == agent_id, m.timestamp >= since)
    found: datetime | None = conn.execute(query).scalar()
    return found


def agent_calls(
    conn: Connection,
    agent_id: str,
    *,
    since: datetime | None = None,
    newest_first: bool = False,
    limit: int | None = None,
    offset: int = 0,
) -> list[MetricRow]:
    """An agent's call rows since `since` (all when None), by time."""
    m = metrics.c
    query = sa.select(*(m[name] for name in COLUMNS)).where(m.agent_id == agent_id)
    if since is not None:
        query = query.where(m.timestamp >= since)
    query = query.order_by(m.timestamp.desc() if newest_first else m.timestamp)
    if limit is not None:
        query = query.limit(limit).offset(offset)
    return [MetricRow(*row) for row in conn.execute(query)]


def agent_totals(conn: Connection, agent_id: str, *, since: datetime | None) -> CallTotals:
    """An agent's calls, failed ones, tokens and cost since `since` (all when None)."""
    m = metrics.c
    query = sa.select(
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(sa.case((m.status == "ok", 0), else_=1)), 0),
        sa.func.coalesce(sa.func.sum(m.total_tokens), 0),
        sa.func.coalesce(sa.func.sum(m.estimated_cost_usd), 0.0),
    ).where(m.agent_id == agent_id)
    if since is not None:
        query = query.where(m.timestamp >= since)
    calls, errors, tokens, cost = conn.execute(query).one()
    return CallTotals(int(calls), int(errors), int(tokens), float(cost))


def evaluate(
    conn: Connection,
    metrics_id: str,
    agent_id: str,
    *,
    quality_score: float,
    task_success: bool,
    self_evaluation: str,
    would_use_again: bool | None,
    better_model_suggestion: str | None,
) -> bool:
    """Record an agent's rating of one of its calls; False when it has no such call."""
    m = metrics.c
    before = [
        (key, old)
        for _, key, old in _locked_keys(conn, [metrics_id], m.quality_score, m.task_success)
        if key[1] == str(agent_id)
    ]
    if not before:
        return False
    key, (old, old_success) = before[0]
    change = _zeros()
    change[_QUALITY] = quality_score - (0.0 if old is None else float(old))
    change[_QUALITY + 1] = 1 if old is None else 0
    change[_FAILED] = _failed(task_success) - _failed(old_success)
    done = conn.execute(
        metrics.update()
        .where(m.id == metrics_id, m.agent_id == agent_id)
        .values(
            quality_score=quality_score,
            task_success=task_success,
            self_evaluation=self_evaluation,
            would_use_again=would_use_again,
            better_model_suggestion=better_model_suggestion,
        )
    )
    _accumulate(conn, {key: change})
    return bool(done.rowcount)


# ------------------------------------------------------------------ prices
def prices(conn: Connection) -> list[PriceRow]:
    """Every row of the price table."""
    p = model_pricing.c
    rows = conn.execute(sa.select(*(p[name] for name in PriceRow._fields)))
    return [PriceRow(*row) for row in rows]


def save_price(conn: Connection, price: PriceRow, *, updated_at: datetime) -> None:
    """Insert or replace one price row (checked by the caller)."""
    values = {name: getattr(price, name) for name in PriceRow._fields[2:]}
    values["updated_at"] = updated_at
    p = model_pricing.c
    key = (p.provider == price.provider) & (p.model == price.model)
    if conn.execute(model_pricing.update().where(key).values(**values)).rowcount == 0:
        conn.execute(
            model_pricing.insert().values(provider=price.provider, model=price.model, **values)
        )


def costed_models(conn: Connection, provider: str) -> list[str]:
    """The provider's models among stored calls whose cost did not come from the provider."""
    m = metrics.c
    query = sa.select(m.model).where(m.provider == provider, m.cost_source != "provider").distinct()
    return list(conn.execute(query).scalars())


def costable_calls(conn: Connection, provider: str, models: Iterable[str]) -> list[CostInputs]:
    """The calls of `models` whose cost did not come from the provider."""
    m = metrics.c
    query = sa.select(*(m[name] for name in CostInputs._fields)).where(
        m.provider == provider, m.model.in_(list(models)), m.cost_source != "provider"
    )
    return [CostInputs(*row) for row in conn.execute(query)]


def set_costs(conn: Connection, costs: Sequence[tuple[str, float]]) -> None:
    """Set (call id, cost) from the price table (cost_source `pricing`); the rollup rows
    of those calls change by the difference."""
    if not costs:
        return
    m = metrics.c
    new = dict(costs)
    change: dict[tuple[str, ...], list[Any]] = {}
    ids = list(new)
    for start in range(0, len(ids), 500):
        for row_id, key, old in _locked_keys(conn, ids[start : start + 500], m.estimated_cost_usd):
            delta = _zeros()
            delta[_COST] = new[row_id] - float(old[0])
            _add(change, key, delta)
    conn.execute(
        metrics.update()
        .where(m.id == sa.bindparam("row_id"))
        .values(estimated_cost_usd=sa.bindparam("cost"), cost_source="pricing"),
        [{"row_id": row_id, "cost": cost} for row_id, cost in costs],
    )
    _accumulate(conn, change)
