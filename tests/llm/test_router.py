"""LlmRouter: resolution, fallback order, cooldown, and one metrics row per attempt."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.providers import ProviderFacts, ProviderOptions
from opencrab.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderServerError,
    RateLimited,
    StreamInterrupted,
)
from opencrab.llm.metrics import PRICE_TTL_SECS, MetricsRecorder
from opencrab.llm.pricing import ModelPrice, save_price
from opencrab.llm.router import EMBEDDED, CallInfo, LlmRouter, Target, offline_hint
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatRequest, Message, Usage
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics
from tests.fakes.scripted_provider import ScriptedProvider, reply


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(model: str = "") -> ChatRequest:
    return ChatRequest(model=model, messages=[Message.user("hello")])


def rows(db: Database) -> list[Any]:
    with db.read() as conn:
        return list(
            conn.execute(
                sa.select(llm_usage_metrics).order_by(
                    llm_usage_metrics.c.timestamp, llm_usage_metrics.c.attempt
                )
            )
        )


@pytest.fixture
def recorder(db: Database) -> MetricsRecorder:
    return MetricsRecorder(db)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def router(settings: Settings, recorder: MetricsRecorder, clock: Clock) -> LlmRouter:
    r = LlmRouter(settings, metrics=recorder, cooldown_secs=30, clock=clock)
    for name in ("openai", "anthropic", "openrouter", "ollama", "google"):
        r.register_provider(ScriptedProvider(name, f"hello from {name}"))
    return r


def scripted(router: LlmRouter, name: str) -> ScriptedProvider:
    provider = router.providers[name]
    assert isinstance(provider, ScriptedProvider)
    return provider


# ------------------------------------------------------------------ resolution
def test_every_seed_alias_resolves(router: LlmRouter, settings: Settings) -> None:
    for alias, ref in settings.llm.aliases.items():
        assert router.resolve(alias) == Target(ref.provider, ref.model)
    assert router.resolve("fast") == Target("openai", "gpt-5-mini")
    assert router.resolve("claude_best") == Target("anthropic", "claude-opus-4.6")
    assert router.resolve("codex") == Target("openrouter", "openai/gpt-5.3-codex")
    assert router.resolve("local") == Target("ollama", "llama3.3:70b")


def test_provider_slash_model_and_plain_models(router: LlmRouter) -> None:
    assert router.resolve("anthropic/claude-haiku-4.5") == Target("anthropic", "claude-haiku-4.5")
    assert router.resolve("openrouter/deepseek/deepseek-v3.2") == Target(
        "openrouter", "deepseek/deepseek-v3.2"
    )
    assert router.resolve("gpt-4.1") == Target("openai", "gpt-4.1")  # the default provider's
    assert router.resolve("meta-llama/llama-3.3-70b") == Target(
        "openai", "meta-llama/llama-3.3-70b"
    )  # "meta-llama" is not a provider


def test_purpose_models_fall_back_to_the_default(router: LlmRouter) -> None:
    assert router.resolve(purpose="thinking") == Target("anthropic", "claude-opus-4.6")
    assert router.resolve(purpose="tool_calling") == Target("openai", "gpt-5.2")
    assert router.resolve(purpose="embedding") == Target("openai", "text-embedding-3-large")
    assert router.resolve(purpose="chit-chat") == Target("openai", "gpt-4o")
    assert router.resolve() == Target("openai", "gpt-4o")
    router.settings.llm.models.creative = None
    assert router.resolve(purpose="creative") == Target("openai", "gpt-4o")


async def test_runtime_alias_and_chain_changes(router: LlmRouter) -> None:
    router.set_model_alias("mine", "google", "gemini-3-flash")
    router.set_fallback_chain(["google"])
    assert router.resolve("mine") == Target("google", "gemini-3-flash")
    # a fallback provider uses the first model configured for it: here the first google alias
    assert [str(t) for t in router.candidates(Target("openai", "x"))] == [
        "openai/x",
        "google/gemini-2.5-flash-lite",
    ]


# ------------------------------------------------------------------ fallback and metrics
def chain_of(router: LlmRouter, first: str) -> list[str]:
    provider, model = first.split("/", 1)
    return [str(t) for t in router.candidates(Target(provider, model))]


def test_a_bare_provider_falls_back_within_the_tier(router: LlmRouter) -> None:
    # seed chain: openai, anthropic, openrouter, ollama
    assert chain_of(router, "openai/gpt-5-mini") == [
        "openai/gpt-5-mini",
        "anthropic/claude-haiku-4.5",  # claude_fast
        "openrouter/openai/gpt-5.3-codex",  # openrouter has no tiers: its configured model
        "ollama/qwen3:8b",  # local_fast
    ]
    # the best tier: openai has no "best" alias, so its next lower tier, smart (gpt-5.2),
    # never reasoning (gpt-5.2-pro) nor anything pricier
    assert chain_of(router, "anthropic/claude-opus-4.6")[:2] == [
        "anthropic/claude-opus-4.6",
        "openai/gpt-5.2",
    ]
    assert chain_of(router, "anthropic/claude-sonnet-4.5")[1] == "openai/gpt-5.2"  # smart


def test_a_model_without_a_tier_falls_back_to_one_no_pricier(
    router: LlmRouter, db: Database
) -> None:
    router.set_fallback_chain(["anthropic", "google"])
    # unpriced: each provider's cheapest tier
    assert chain_of(router, "openai/gpt-4o") == [
        "openai/gpt-4o",
        "anthropic/claude-haiku-4.5",
        "google/gemini-2.5-flash-lite",
    ]
    # gpt-5.2-pro (189 $ per 1M in + out) may fall back to every provider's best tier
    assert chain_of(router, "openai/gpt-5.2-pro") == [
        "openai/gpt-5.2-pro",
        "anthropic/claude-opus-4.6",
        "google/gemini-3-pro",
    ]
    with db.write() as conn:
        save_price(conn, ModelPrice("openai", "gpt-4o", 2.5, 10.0))
    router.metrics.reload_prices()  # type: ignore[union-attr]
    # now 12.50: opus (30) and sonnet (18) cost more, haiku (6) does not; gemini-3-pro (14)
    # costs more, gemini-3-flash (3.5) does not
    assert chain_of(router, "openai/gpt-4o") == [
        "openai/gpt-4o",
        "anthropic/claude-haiku-4.5",
        "google/gemini-3-flash",
    ]


def test_the_chain_may_name_models_and_aliases(router: LlmRouter) -> None:
    router.set_fallback_chain(["claude_best", "google/gemini-3-pro", "openai/gpt-5.2"])
    # named explicitly, so a pricier model is the config's own choice
    assert chain_of(router, "openai/gpt-5-mini") == [
        "openai/gpt-5-mini",
        "anthropic/claude-opus-4.6",
        "google/gemini-3-pro",
        "openai/gpt-5.2",
    ]


async def test_fallback_follows_the_chain_and_records_every_attempt(
    router: LlmRouter, recorder: MetricsRecorder, db: Database
) -> None:
    scripted(router, "openai").then(RateLimited("slow down", provider="openai", status=429))
    scripted(router, "openai").outcomes.popleft()
    scripted(router, "anthropic").outcomes = type(scripted(router, "anthropic").outcomes)(
        [ProviderServerError("HTTP 500", provider="anthropic", status=500)]
    )
    answer = await router.chat(request("fast"), CallInfo(purpose="analysis", task_type="summary"))
    assert answer.text == "hello from openrouter"
    assert answer.provider == "openrouter"
    await recorder.flush()
    stored = rows(db)
    assert [(r.provider, r.status, r.attempt) for r in stored] == [
        ("openai", "error", 1),
        ("anthropic", "error", 2),
        ("openrouter", "ok", 3),
    ]
    assert stored[0].model == "gpt-5-mini"
    assert stored[0].error_type == "rate_limited"
    assert stored[1].error_type == "provider_server_error"
    assert "HTTP 500" in stored[1].error
    assert len({r.request_id for r in stored}) == 1
    assert {r.purpose for r in stored} == {"analysis"}
    assert {r.task_type for r in stored} == {"summary"}
    assert answer.metrics_id == stored[2].id
    # a bare provider in the chain answers with its model of the failed one's tier:
    # fast (openai/gpt-5-mini) → claude_fast, not anthropic's priciest (claude-opus-4.6)
    assert scripted(router, "anthropic").requests[0].model == "claude-haiku-4.5"
    assert [(r.attempt, r.fallback_from) for r in stored] == [
        (1, None),
        (2, "openai/gpt-5-mini"),
        (3, "anthropic/claude-haiku-4.5"),
    ]


@pytest.mark.parametrize(
    "error",
    [
        ProviderAuthError("HTTP 401: bad key", provider="openai", status=401),
        ProviderBadRequest("HTTP 400: bad request", provider="openai", status=400),
    ],
)
async def test_no_fallback_on_client_errors(
    router: LlmRouter, recorder: MetricsRecorder, db: Database, error: Exception
) -> None:
    scripted(router, "openai").outcomes.clear()
    scripted(router, "openai").then(error)  # type: ignore[arg-type]
    with pytest.raises(type(error)):
        await router.chat(request("fast"))
    await recorder.flush()
    assert [(r.provider, r.status) for r in rows(db)] == [("openai", "error")]
    assert scripted(router, "anthropic").requests == []


async def test_cooldown_skips_a_failing_provider_for_a_while(
    router: LlmRouter, clock: Clock
) -> None:
    openai = scripted(router, "openai")
    openai.outcomes.clear()
    openai.then(RateLimited("429", provider="openai", status=429), "openai is back")
    first = await router.chat(request("fast"))
    assert first.provider == "anthropic"
    assert len(openai.requests) == 1
    clock.now += 10  # still cooling: anthropic is asked first, openai is not called
    second = await router.chat(request("fast"))
    assert second.provider == "anthropic"
    assert len(openai.requests) == 1
    clock.now += 25  # cooldown over
    third = await router.chat(request("fast"))
    assert third.provider == "openai"
    assert third.text == "openai is back"


async def test_a_call_tries_its_targets_in_the_order_they_had_when_it_began(
    router: LlmRouter, clock: Clock
) -> None:
    # the fallbacks are worked out only after the first target fails; by then its
    # provider cools, yet its other model keeps its place in this call's order
    router.set_fallback_chain(["openai/gpt-4.1", "anthropic"])
    openai = scripted(router, "openai")
    openai.outcomes.clear()
    openai.then(RateLimited("429", provider="openai", status=429), "gpt-4.1 answers")
    answer = await router.chat(request("fast"))
    assert [r.model for r in openai.requests] == ["gpt-5-mini", "gpt-4.1"]
    assert (answer.provider, answer.text) == ("openai", "gpt-4.1 answers")
    assert scripted(router, "anthropic").requests == []
    # the next call starts with openai cooling: both its models go last
    assert chain_of(router, "openai/gpt-5-mini") == [
        "anthropic/claude-haiku-4.5",
        "openai/gpt-5-mini",
        "openai/gpt-4.1",
    ]


async def test_everyone_cooling_still_tries_in_order(router: LlmRouter, clock: Clock) -> None:
    for name in ("openai", "anthropic", "openrouter", "ollama"):
        provider = scripted(router, name)
        provider.outcomes.clear()
        provider.then(ProviderServerError("503", provider=name, status=503), f"{name} ok")
    with pytest.raises(ProviderServerError):
        await router.chat(request("fast"))
    answer = await router.chat(request("fast"))
    assert answer.provider == "openai"


async def test_cost_comes_from_pricing_or_the_provider(
    router: LlmRouter, recorder: MetricsRecorder, db: Database
) -> None:
    scripted(router, "openai").outcomes.clear()
    scripted(router, "openai").then(reply("ok", usage=Usage.of(1_000_000, 1_000_000)))
    answer = await router.chat(request("fast"))  # gpt-5-mini: $0.25 in + $2.00 out per 1M
    assert answer.cost_usd == pytest.approx(2.25)
    scripted(router, "openrouter").outcomes.clear()
    scripted(router, "openrouter").then(reply("ok", usage=Usage.of(5000, 100), cost_usd=0.0123))
    reported = await router.chat(request("deepseek"))
    assert reported.cost_usd == pytest.approx(0.0123)
    scripted(router, "ollama").outcomes.clear()
    scripted(router, "ollama").then(reply("ok", usage=Usage.of(900, 100)))
    local = await router.chat(request("local"))
    assert local.cost_usd == 0.0
    await recorder.flush()
    stored = {r.provider: r for r in rows(db)}
    assert stored["openai"].estimated_cost_usd == pytest.approx(2.25)
    assert stored["openai"].cost_source == "pricing"
    assert stored["openrouter"].estimated_cost_usd == pytest.approx(0.0123)
    assert stored["openrouter"].cost_source == "provider"
    assert (stored["ollama"].estimated_cost_usd, stored["ollama"].cost_source) == (0.0, "pricing")
    assert stored["openai"].input_tokens == 1_000_000
    assert stored["openai"].total_tokens == 2_000_000
    assert stored["openai"].latency_ms >= 0


async def test_a_price_set_while_running_costs_the_next_calls(
    settings: Settings, db: Database, clock: Clock
) -> None:
    recorder = MetricsRecorder(db, clock=clock)
    router = LlmRouter(settings, metrics=recorder, clock=clock)
    router.register_provider(ScriptedProvider("openai", reply("ok", usage=Usage.of(10**6, 10**6))))
    assert (await router.chat(request("fast"))).cost_usd == pytest.approx(2.25)
    with db.write() as conn:  # as `opencrab llm price openai gpt-5-mini …` does
        save_price(conn, ModelPrice("openai", "gpt-5-mini", 1.0, 4.0))
    clock.now += PRICE_TTL_SECS / 2
    assert (await router.chat(request("fast"))).cost_usd == pytest.approx(2.25)
    clock.now += PRICE_TTL_SECS
    assert (await router.chat(request("fast"))).cost_usd == pytest.approx(5.0)
    await recorder.aclose()
    assert [r.estimated_cost_usd for r in rows(db)] == pytest.approx([2.25, 2.25, 5.0])


async def test_unconfigured_providers_are_skipped_without_a_row(
    router: LlmRouter, recorder: MetricsRecorder, db: Database
) -> None:
    scripted(router, "openai").configured = False
    answer = await router.chat(request("fast"))
    assert answer.provider == "anthropic"
    await recorder.flush()
    assert [r.provider for r in rows(db)] == ["anthropic"]


async def test_chat_with_provider_does_not_fall_back(router: LlmRouter) -> None:
    anthropic = scripted(router, "anthropic")
    anthropic.outcomes.clear()
    anthropic.then(RateLimited("429", provider="anthropic", status=429))
    with pytest.raises(RateLimited):
        await router.chat_with_provider("anthropic", request("claude-haiku-4.5"))
    assert anthropic.requests[0].model == "claude-haiku-4.5"
    assert scripted(router, "openai").requests == []


class VaultOptions(ProviderOptions):
    token: SecretStr = SecretStr("vault-token-0451")


class VaultProvider(ScriptedProvider):
    """A provider whose own settings hold a secret."""

    facts = ProviderFacts(options=VaultOptions)


async def test_a_secret_among_a_providers_own_settings_is_redacted(settings: Settings) -> None:
    router = LlmRouter(settings)
    vault = VaultProvider("vault", ProviderServerError("echoed vault-token-0451", status=500))
    router.register_provider(vault)
    with pytest.raises(ProviderServerError) as failed:
        await router.chat_with_provider("vault", request("m"))
    assert "vault-token-0451" not in str(failed.value)


# ------------------------------------------------------------------ streaming
async def test_stream_records_ttft_and_falls_back_before_the_first_chunk(
    router: LlmRouter, recorder: MetricsRecorder, db: Database
) -> None:
    openai = scripted(router, "openai")
    openai.outcomes.clear()
    openai.then(ProviderServerError("502", provider="openai", status=502))
    acc = StreamAccumulator(provider="?", model="?")
    async for chunk in router.stream(request("fast"), CallInfo(agent_id="agent-1")):
        acc.add(chunk)
    assert acc.text == "hello from anthropic"
    await recorder.flush()
    stored = rows(db)
    assert [(r.provider, r.status, r.stream) for r in stored] == [
        ("openai", "error", True),
        ("anthropic", "ok", True),
    ]
    assert stored[1].time_to_first_token_ms is not None
    assert stored[1].output_tokens == 5
    assert {r.agent_id for r in stored} == {"agent-1"}


async def test_stream_failing_after_the_first_chunk_is_not_retried(
    router: LlmRouter, recorder: MetricsRecorder, db: Database
) -> None:
    openai = scripted(router, "openai")
    openai.outcomes.clear()
    openai.then("a long answer that breaks")
    openai.fail_stream_after = 2
    openai.stream_error = StreamInterrupted("connection dropped", provider="openai")
    seen: list[str] = []

    async def consume() -> None:
        async for chunk in router.stream(request("fast")):
            seen.append(chunk.text)

    with pytest.raises(StreamInterrupted):
        await consume()
    assert seen == ["a lo", "ng a"]
    assert scripted(router, "anthropic").requests == []
    await recorder.flush()
    assert [(r.provider, r.status, r.error_type) for r in rows(db)] == [
        ("openai", "error", "stream_interrupted")
    ]


# ------------------------------------------------------------------ offline default
async def test_no_credentials_means_the_embedded_model(settings: Settings) -> None:
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", "x", configured=False))
    router.register_provider(ScriptedProvider("ollama", "x", configured=False))
    router.register_provider(ScriptedProvider(EMBEDDED, "I am small"))
    await router.start()
    assert router.offline
    assert router.notice == offline_hint()
    assert router.resolve() == Target(EMBEDDED, "smollm2-135m-instruct")
    assert router.resolve("fast") == Target(EMBEDDED, "smollm2-135m-instruct")
    assert router.resolve(purpose="thinking").provider == EMBEDDED
    answer = await router.chat(request())
    assert (answer.provider, answer.text) == (EMBEDDED, "I am small")


async def test_one_real_provider_is_enough_to_stay_online(settings: Settings) -> None:
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", "x", configured=False))
    router.register_provider(ScriptedProvider("anthropic", "from claude"))
    router.register_provider(ScriptedProvider(EMBEDDED, "small"))
    await router.start()
    assert not router.offline
    assert router.notice == (
        "the default provider 'openai' is not configured; "
        "using anthropic/claude-opus-4.6 as the default"
    )
    assert router.resolve() == Target("anthropic", "claude-opus-4.6")
    answer = await router.chat(request())
    assert answer.provider == "anthropic"


async def test_a_configured_default_needs_no_notice(settings: Settings) -> None:
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", "x"))
    router.register_provider(ScriptedProvider("anthropic", "from claude"))
    await router.start()
    assert router.notice is None
    assert router.resolve() == Target("openai", "gpt-4o")


async def test_a_local_server_becomes_the_default_with_its_loaded_model(
    settings: Settings,
) -> None:
    router = LlmRouter(settings)
    router.register_provider(ScriptedProvider("openai", "x", configured=False))
    router.register_provider(ScriptedProvider("llamacpp", "local answer", models=["qwen3-8b"]))
    router.register_provider(ScriptedProvider(EMBEDDED, "small"))
    await router.start()
    assert not router.offline
    assert router.resolve() == Target("llamacpp", "qwen3-8b")
    answer = await router.chat(request())
    assert (answer.provider, answer.model, answer.text) == ("llamacpp", "qwen3-8b", "local answer")
