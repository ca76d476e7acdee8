"""The filter every LLM cost and quality figure shares (`/api/analytics/llm/*`, the
Costs page, the export): a period as `from`/`to` UTC days or the last `days`, an agent,
purpose, provider, model and source (live calls or imported transcripts). `UsageFilter`,
`Bucket` and `Stack` are the repository's own types, named here for the adapters."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from opencrab.core.runtime import Runtime
from opencrab.errors import ValidationError
from opencrab.reports.model import ApiModel
from opencrab.store import Database
from opencrab.store.repositories import agents as agents_repo
from opencrab.store.repositories.llm_analytics import Bucket as Bucket
from opencrab.store.repositories.llm_analytics import Stack as Stack
from opencrab.store.repositories.llm_analytics import UsageFilter as UsageFilter

DEFAULT_DAYS = 30
MAX_DAYS = 3650


class Filter(ApiModel):
    """The filter as applied (echoed by every answer)."""

    since: datetime | None
    until: datetime | None
    agent_id: str | None
    purpose: str | None
    provider: str | None
    model: str | None
    source: Literal["all", "live", "imported"]


DAY = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
FIRST_DAY = date(1970, 1, 1)
LAST_DAY = date(2999, 12, 31)
"""The days `from` and `to` may name (a day past LAST_DAY would have no end in a
datetime; nothing OpenCrab records lies outside them)."""


def _date(name: str, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{name}: {value!r} is not a day (YYYY-MM-DD)") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise ValidationError(
            f"{name}: {value} is out of range (a day from {FIRST_DAY} to {LAST_DAY})"
        )
    return day


def _day(value: date) -> datetime:
    return datetime.combine(value, time(), tzinfo=UTC)


def usage_filter_of(
    runtime: Runtime,
    *,
    from_: str | None = None,
    to: str | None = None,
    days: int | None = None,
    agent_id: str | None = None,
    purpose: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    source: Literal["all", "live", "imported"] = "all",
) -> UsageFilter:
    """The shared filter of every figure from what was asked: `from`/`to` UTC days or the
    last `days` (default DEFAULT_DAYS), an agent by id or name, purpose, provider, model
    and source. A bad day, a range that ends before it starts, both forms at once:
    ValidationError; an agent that does not exist: NotFoundError."""
    first, last = _date("from", from_), _date("to", to)
    if days is not None and (from_ is not None or to is not None):
        raise ValidationError("give either days or from/to, not both")
    if first is not None and last is not None and last < first:
        raise ValidationError(f"to ({to}) is before from ({from_})")
    since = until = None
    if first is not None or last is not None:
        since = None if first is None else _day(first)
        until = None if last is None else _day(last) + timedelta(days=1)
    else:
        now = datetime.now(UTC)
        since = _day(now.date()) - timedelta(days=(days or DEFAULT_DAYS) - 1)
    resolved = None
    if agent_id:
        resolved = runtime.agents.get(agent_id).id  # NotFoundError: 404
    return UsageFilter(
        since=since,
        until=until,
        agent_id=resolved,
        purpose=purpose or None,
        provider=provider or None,
        model=model or None,
        source=source,
    )


def filter_echo(flt: UsageFilter) -> Filter:
    """The filter as the answers show it."""
    return Filter(
        since=flt.since,
        until=flt.until,
        agent_id=flt.agent_id,
        purpose=flt.purpose,
        provider=flt.provider,
        model=flt.model,
        source=flt.source,
    )


def agent_names(db: Database) -> dict[str, str]:
    """Every agent's name by its id (the figures label agents by name)."""
    with db.read() as conn:
        return {k: v[0] for k, v in agents_repo.agent_names(conn).items()}
