"""LLM settings over HTTP (seed 001 "LLM設定画面" and "LLMモニタリング").

Providers on and off, API keys (stored encrypted; only their last four characters ever
come back), base URLs, aliases and the fallback chain, each with where its value comes
from; values set by the command line, the environment or the config file are refused
with 409 (opencrab.llm.live_settings has the precedence). Changes apply to the running
router at once and are audited. A connection test makes one tiny real call. Monitoring:
usage, response times, error rate and cost per provider from `llm_usage_metrics`. What
they show is opencrab.reports.llm_settings and reports.llm_monitoring.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, FastAPI, Path, Query, Request
from pydantic import Field

from opencrab.core.runtime import Runtime
from opencrab.errors import LlmError, NotFoundError, ValidationError
from opencrab.llm.router import CallInfo
from opencrab.llm.types import ChatRequest, Message
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import llm_monitoring, llm_settings
from opencrab.reports.llm_monitoring import Monitoring
from opencrab.reports.llm_settings import (
    AliasSetting,
    AuditRecord,
    FallbackSetting,
    LlmSettingsView,
    ProviderChanged,
    ProviderSettings,
    ValueSource,
)
from opencrab.server.deps import DatabaseDep, RuntimeDep, actor_of
from opencrab.server.schemas import ApiInput, ApiModel, Offset, Period, error_responses

router = APIRouter(prefix="/api/llm", tags=["LLM settings"])

Name = Annotated[str, Path(max_length=64)]
TEST_TIMEOUT_SECS = 30.0


class ProviderUpdate(ApiInput):
    enabled: bool | None = None
    api_key: str | None = None  # "" clears the stored key
    base_url: str | None = None  # "" clears the stored URL


class AliasUpdate(ApiInput):
    provider: str
    model: str


class FallbackUpdate(ApiInput):
    chain: list[Annotated[str, Field(min_length=1, max_length=265)]] = Field(max_length=50)


class ConnectionTest(ApiModel):
    provider: str
    model: str
    ok: bool
    latency_ms: int
    error: str | None = None


@router.get("/settings", operation_id="getLlmSettings", response_model=LlmSettingsView)
async def get_settings(runtime: RuntimeDep) -> LlmSettingsView:
    """Every provider's switch, key (its last four characters) and base URL, the aliases
    and the fallback chain, each with where its value comes from."""
    return await run_blocking(llm_settings.settings_view, runtime)


@router.patch(
    "/providers/{name}",
    operation_id="updateProviderSettings",
    response_model=ProviderChanged,
    responses=error_responses(400, 404, 409),
)
async def update_provider(
    name: Name, body: ProviderUpdate, request: Request, runtime: RuntimeDep
) -> ProviderChanged:
    """Switch a provider, set or clear its API key or base URL; applied at once.

    A stored key belongs to the origin (scheme, host, port) it was entered for: a base
    URL on another origin clears it (`keyCleared` says so) unless `apiKey` is given in
    the same request.

    409: the value is set by the command line, the environment or the config file; a
    base URL would take a key set there to another origin; or the secret key cannot
    decrypt the keys already stored (the message says what to do).
    """
    changes = body.model_dump(exclude_unset=True)
    live = runtime.llm_settings
    cleared = await live.update_provider(name, changes, actor=actor_of(request))
    views = await run_blocking(live.provider_views)
    view = ProviderSettings.of(next(v for v in views if v.name == name))
    return ProviderChanged(**view.model_dump(), key_cleared=cleared)


@router.post(
    "/providers/{name}/test",
    operation_id="testProvider",
    response_model=ConnectionTest,
    responses=error_responses(400, 404),
)
async def test_provider(name: Name, runtime: RuntimeDep) -> ConnectionTest:
    """One tiny real call to the provider (its default model): ok and latency, or the
    error with every secret redacted. The call's metrics row is stored before the answer,
    so the monitoring figures read next include it."""
    router_ = runtime.router
    known = {v.name for v in await run_blocking(runtime.llm_settings.provider_views)}
    if name not in known:
        raise NotFoundError(f"no provider {name!r}")
    model = router_.default_model_for(name) or ""
    request = ChatRequest(
        model=model, messages=[Message.user("ping")], max_tokens=1, timeout=TEST_TIMEOUT_SECS
    )
    started = time.perf_counter()
    try:
        await router_.chat_with_provider(
            name, request, CallInfo(purpose="analysis", task_type="connection_test")
        )
    except LlmError as exc:
        error = router_.redactor.redact(str(exc))
        latency = round((time.perf_counter() - started) * 1000)
        await _stored(runtime)
        return ConnectionTest(provider=name, model=model, ok=False, latency_ms=latency, error=error)
    latency = round((time.perf_counter() - started) * 1000)
    await _stored(runtime)
    return ConnectionTest(provider=name, model=model, ok=True, latency_ms=latency)


async def _stored(runtime: Runtime) -> None:
    """Wait until the router's queued metrics rows are stored."""
    if runtime.router.metrics is not None:
        await runtime.router.metrics.flush()


@router.put(
    "/aliases/{alias}",
    operation_id="setAlias",
    response_model=AliasSetting,
    responses=error_responses(400, 409),
)
async def set_alias(
    alias: Name, body: AliasUpdate, request: Request, runtime: RuntimeDep
) -> AliasSetting:
    """Add or change a model alias; applied at once."""
    live = runtime.llm_settings
    await live.set_alias(alias, body.provider, body.model, actor=actor_of(request))
    for name, target, source in await run_blocking(live.alias_views):
        if name == alias:
            return AliasSetting(
                alias=name,
                provider=target.provider,
                model=target.model,
                source=ValueSource.of(source),
            )
    raise ValidationError(f"alias {alias!r} was not stored")  # pragma: no cover


@router.delete(
    "/aliases/{alias}",
    operation_id="removeAlias",
    status_code=204,
    responses=error_responses(404, 409),
)
async def remove_alias(alias: Name, request: Request, runtime: RuntimeDep) -> None:
    """Remove a model alias (a packaged one too); applied at once."""
    await runtime.llm_settings.set_alias(alias, None, None, actor=actor_of(request))


@router.put(
    "/fallback",
    operation_id="setFallbackChain",
    response_model=FallbackSetting,
    responses=error_responses(400, 409),
)
async def set_fallback(
    body: FallbackUpdate, request: Request, runtime: RuntimeDep
) -> FallbackSetting:
    """Order the fallback chain (providers, aliases or provider/model); applied at once."""
    await runtime.llm_settings.set_chain(body.chain, actor=actor_of(request))
    chain, source = await run_blocking(runtime.llm_settings.chain_view)
    return FallbackSetting(chain=chain, source=ValueSource.of(source))


@router.get("/settings/audit", operation_id="getLlmSettingsAudit", response_model=list[AuditRecord])
async def get_audit(
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    offset: Offset = 0,
) -> list[AuditRecord]:
    """Who changed which LLM setting and when, newest first (never a secret)."""
    return await run_blocking(llm_settings.audit_records, runtime, limit, offset)


@router.get(
    "/monitoring",
    operation_id="getLlmMonitoring",
    response_model=Monitoring,
    responses=error_responses(400),
)
async def get_monitoring(db: DatabaseDep, period: Period = "week") -> Monitoring:
    """Per provider: calls, errors and error rate, tokens, estimated cost, and response
    times (mean, median, 95th percentile, slowest, time to first token)."""
    return await run_blocking(llm_monitoring.monitoring, db, period)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
