"""The LLM layer over HTTP (seed 001 `/api/llm/…` and `/api/agents/{id}/llm/…`).

Providers and models as the running router sees them; an agent's LLM configuration
(default model, per-purpose models, self-selection whitelist, daily and monthly
budgets); its call records (one per attempt, failures included) and their totals.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query

from opencrab.core.agent import AgentUpdate
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.errors import LlmError
from opencrab.plugins import hookimpl
from opencrab.reports import llm_metrics
from opencrab.reports.llm_metrics import CallRecordResponse, GroupBy, MetricsSummary
from opencrab.server.deps import AgentDep, AgentStoreDep, DatabaseDep, RuntimeDep
from opencrab.server.schemas import ApiModel, Offset, Period, error_responses

router = APIRouter(prefix="/api", tags=["LLM"])

PROBE_TIMEOUT = 10.0


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
    return llm_metrics.call_records(db, agent.id, period=period, limit=limit, offset=offset)


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
    return llm_metrics.metrics_summary(db, agent.id, period=period, group_by=group_by)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
