"""The query string of every LLM cost figure (`/api/analytics/llm/*`, the export, the
Costs page) as a FastAPI dependency: it parses the parameters and leaves the rules to
opencrab.reports.llm_filter.usage_filter_of."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query, Request

from opencrab.core.runtime import Runtime
from opencrab.reports.llm_filter import (
    DAY,
    DEFAULT_DAYS,
    FIRST_DAY,
    LAST_DAY,
    MAX_DAYS,
    Bucket,
    Stack,
    UsageFilter,
    usage_filter_of,
)


async def usage_filter(
    request: Request,
    from_: Annotated[
        str | None,
        Query(
            alias="from",
            pattern=DAY,
            description=f"First UTC day included (YYYY-MM-DD, {FIRST_DAY} to {LAST_DAY}).",
        ),
    ] = None,
    to: Annotated[
        str | None,
        Query(
            pattern=DAY,
            description=f"Last UTC day included (YYYY-MM-DD, {FIRST_DAY} to {LAST_DAY}).",
        ),
    ] = None,
    days: Annotated[
        int | None,
        Query(ge=1, le=MAX_DAYS, description=f"The last N days (default {DEFAULT_DAYS})."),
    ] = None,
    agent_id: Annotated[
        str | None, Query(alias="agentId", max_length=200, description="An agent's id or name.")
    ] = None,
    purpose: Annotated[str | None, Query(max_length=32)] = None,
    provider: Annotated[str | None, Query(max_length=64)] = None,
    model: Annotated[str | None, Query(max_length=200)] = None,
    source: Annotated[
        Literal["all", "live", "imported"],
        Query(description="live: calls made through the router; imported: transcripts."),
    ] = "all",
) -> UsageFilter:
    """The shared filter of every figure, from the query string."""
    runtime: Runtime = request.app.state.runtime
    return usage_filter_of(
        runtime,
        from_=from_,
        to=to,
        days=days,
        agent_id=agent_id,
        purpose=purpose,
        provider=provider,
        model=model,
        source=source,
    )


UsageFilterDep = Annotated[UsageFilter, Depends(usage_filter)]
BucketQuery = Annotated[Bucket, Query(description="day or week (a UTC week from Monday).")]
StackQuery = Annotated[Stack, Query(description="What the bars are stacked by.")]
