"""The LLM layer over HTTP (seed 001 `/api/llm/…` and `/api/agents/{id}/llm/…`).

Providers and models as the running router sees them; an agent's LLM configuration
(default model, per-purpose models, self-selection whitelist, daily and monthly
budgets); its call records (one per attempt, failures included) and their totals.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Query

from opencrab.core.agent import AgentUpdate
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.errors import LlmError
from opencrab.llm.metrics import GROUPS, period_start, summarize
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep, AgentStoreDep, DatabaseDep, RuntimeDep
from opencrab.server.schemas import ApiModel, Offset, Period, error_responses
from opencrab.store.repositories import metrics as metrics_repo

router = APIRouter(prefix="/api", tags=["LLM"])

PROBE_TIMEOUT = 10.0
GroupBy = Literal["model", "provider", "purpose", "task_type", "agent", "day", "week"]
assert set(GroupBy.__args__) == set(GROUPS)  # type: ignore[attr-defined]


class ProviderStatus(ApiModel):
    name: str
    configured: bool
    usable: bool | None = None
    is_default: bool
    default_model: str | None = None
    healthy: bool | None = None
    latency_ms: int | None = None


class ModelEntry(ApiModel):
    provider: str
    id: str
    context_window: int | None = None
    supports_vision: bool
    supports_functions: bool


class AliasEntry(ApiModel):
    alias: str
    provider: str
    model: str


class ProviderProblem(ApiModel):
    provider: str
    message: str


class ModelList(ApiModel):
    models: list[ModelEntry]
    aliases: list[AliasEntry]
    problems: list[ProviderProblem]


class CallRecordResponse(ApiModel):
    id: str
    timestamp: datetime
    session_id: str | None = None
    provider: str
    model: str
    purpose: str
    task_type: str | None = None
    status: str
    error_type: str | None = None
    error: str | None = None
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    reasoning_tokens: int
    cost_usd: float
    cost_source: str
    latency_ms: int
    time_to_first_token_ms: int | None = None
    quality_score: float | None = None


class UsageGroup(ApiModel):
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


class MetricsSummary(ApiModel):
    period: str
    group_by: str
    total: UsageGroup
    groups: list[UsageGroup]


@router.get("/llm/providers", operation_id="listProviders", response_model=list[ProviderStatus])
async def list_providers(
    runtime: RuntimeDep,
    probe: Annotated[bool, Query(description="Also ask each configured provider.")] = False,
) -> list[ProviderStatus]:
    """Every provider the server knows, which are configured, and the default."""
    router_ = runtime.router

    async def status(name: str) -> ProviderStatus:
        provider = router_.providers[name]
        configured = provider.is_configured()
        row = ProviderStatus(
            name=name,
            configured=configured,
            usable=None if router_.usable is None else name in router_.usable,
            is_default=name == router_.default.provider,
            default_model=router_.default_model_for(name),
        )
        if probe and configured:
            started = time.perf_counter()
            try:
                row.healthy = await asyncio.wait_for(provider.health_check(), PROBE_TIMEOUT)
            except (LlmError, TimeoutError):
                row.healthy = False
            row.latency_ms = round((time.perf_counter() - started) * 1000)
        return row

    return list(await asyncio.gather(*(status(name) for name in router_.providers)))


@router.get("/llm/models", operation_id="listModels", response_model=ModelList)
async def list_models(
    runtime: RuntimeDep,
    provider: Annotated[str | None, Query(max_length=64, description="Only this one.")] = None,
) -> ModelList:
    """Models of the configured providers (asked live), and the configured aliases."""
    router_ = runtime.router
    names = [n for n in router_.providers if provider is None or n == provider]

    async def ask(name: str) -> tuple[list[ModelEntry], ProviderProblem | None]:
        source = router_.providers[name]
        if not source.is_configured():
            return [], ProviderProblem(provider=name, message="not configured")
        try:
            found = await asyncio.wait_for(source.available_models(), PROBE_TIMEOUT)
        except (LlmError, TimeoutError) as exc:
            problem = router_.redactor.redact(str(exc)) or "timed out"
            return [], ProviderProblem(provider=name, message=problem)
        return [
            ModelEntry(
                provider=name,
                id=m.id,
                context_window=m.context_window,
                supports_vision=m.supports_vision,
                supports_functions=m.supports_functions,
            )
            for m in found
        ], None

    answers = await asyncio.gather(*(ask(name) for name in names))
    return ModelList(
        models=[m for found, _ in answers for m in found],
        aliases=[
            AliasEntry(alias=alias, provider=t.provider, model=t.model)
            for alias, t in sorted(router_.aliases.items())
        ],
        problems=[p for _, p in answers if p is not None],
    )


@router.get(
    "/agents/{id}/llm/config",
    operation_id="getLlmConfig",
    response_model=AgentLlmConfig,
    responses=error_responses(400, 404),
)
def get_llm_config(agent: AgentDep) -> AgentLlmConfig:
    """The agent's LLM configuration (empty fields: the server's choice)."""
    return agent.llm_config


@router.put(
    "/agents/{id}/llm/config",
    operation_id="updateLlmConfig",
    response_model=AgentLlmConfig,
    responses=error_responses(400, 404),
)
def update_llm_config(
    agent: AgentDep, body: AgentLlmConfig, agents: AgentStoreDep
) -> AgentLlmConfig:
    """Replace the agent's LLM configuration."""
    return agents.update(agent.id, AgentUpdate(llm=body)).llm_config


@router.get(
    "/agents/{id}/llm/metrics",
    operation_id="getLlmMetrics",
    response_model=list[CallRecordResponse],
    responses=error_responses(400, 404),
)
def get_llm_metrics(
    agent: AgentDep,
    db: DatabaseDep,
    period: Period = "week",
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """The agent's LLM calls in the period, newest first (one per attempt)."""
    since = period_start(period)
    with db.read() as conn:
        rows = metrics_repo.agent_calls(
            conn, agent.id, since=since, newest_first=True, limit=limit, offset=offset
        )
    return [
        {
            "id": str(r.id),
            "timestamp": r.timestamp,
            "session_id": r.session_id,
            "provider": r.provider,
            "model": r.model,
            "purpose": r.purpose,
            "task_type": r.task_type,
            "status": r.status,
            "error_type": r.error_type,
            "error": r.error,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "total_tokens": r.total_tokens,
            "cache_read_tokens": r.cache_read_tokens,
            "reasoning_tokens": r.reasoning_tokens,
            "cost_usd": r.estimated_cost_usd,
            "cost_source": r.cost_source,
            "latency_ms": r.latency_ms,
            "time_to_first_token_ms": r.time_to_first_token_ms,
            "quality_score": r.quality_score,
        }
        for r in rows
    ]


@router.get(
    "/agents/{id}/llm/metrics/summary",
    operation_id="getLlmMetricsSummary",
    response_model=MetricsSummary,
    responses=error_responses(400, 404),
)
def get_llm_metrics_summary(
    agent: AgentDep,
    db: DatabaseDep,
    period: Period = "week",
    group_by: Annotated[GroupBy, Query(alias="groupBy")] = "model",
) -> MetricsSummary:
    """Calls, errors, tokens, cost and latency per group, most expensive first, with totals."""
    since = period_start(period)
    groups = [
        UsageGroup.model_validate(g.as_json())
        for g in summarize(db, group_by=group_by, since=since, agent_id=agent.id)
    ]
    total = _total(groups)
    return MetricsSummary(period=period, group_by=group_by, total=total, groups=groups)


def _total(groups: list[UsageGroup]) -> UsageGroup:
    calls = sum(g.calls for g in groups)

    def mean(field: str) -> float | None:
        """The groups' averages weighted by their calls (latency: by successful calls)."""
        pairs = [
            (getattr(g, field), g.calls - g.errors if field == "avg_latency_ms" else g.calls)
            for g in groups
            if getattr(g, field) is not None
        ]
        weight = sum(n for _, n in pairs)
        return round(sum(v * n for v, n in pairs) / weight, 1) if weight else None

    return UsageGroup(
        key=None,
        calls=calls,
        errors=sum(g.errors for g in groups),
        input_tokens=sum(g.input_tokens for g in groups),
        output_tokens=sum(g.output_tokens for g in groups),
        total_tokens=sum(g.total_tokens for g in groups),
        cost_usd=round(sum(g.cost_usd for g in groups), 8),
        avg_latency_ms=mean("avg_latency_ms"),
        avg_ttft_ms=mean("avg_ttft_ms"),
        avg_quality=mean("avg_quality"),
    )


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
