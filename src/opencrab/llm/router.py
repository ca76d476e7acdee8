"""LlmRouter (seed 001): pick a provider and model, fall back on failure, record metrics.

A model reference is resolved in this order:
1. an alias from `[llm.aliases]` (`fast` → openai/gpt-5-mini);
2. `provider/model` when `provider` is a registered provider (`openrouter/deepseek/deepseek-v3.2`
   → provider openrouter, model deepseek/deepseek-v3.2);
3. any other non-empty text: a model of the default provider;
4. nothing: the model for the call's purpose when its provider can answer, else the
   default model. A per-purpose model the user set beats the user's default, which beats
   the packaged per-purpose model (opencrab.config.provenance.purpose_model).

A retryable failure (429, 5xx, timeout, connection error, malformed reply) puts the
provider in a short cooldown and moves on along `[llm.fallback] chain` (a bare provider
there answers with its model of the failed model's tier, never a pricier one; see
opencrab.llm.fallback); a request the provider refuses (400, 401, 403) is raised at
once. A failure's text has every configured secret redacted before it is recorded or
raised (a provider may echo the API key). Each attempt writes one `llm_usage_metrics`
row, numbered (`attempt`) and naming the model it falls back from (`fallback_from`); a
caller that passes `CallInfo.records` (the engine's turns) gets the successful attempt's
row there and writes it itself, with the call's token_usage event.
Before each attempt the router's `guard` (core/reservations.BudgetGuard, installed by the
Runtime) reserves the attempt's estimated cost under the caps that apply, or refuses it
with BudgetExceeded; the attempt's metrics row settles the reservation when stored, and
an attempt that ends without one (cancelled) releases it. Each attempt's end is told to
the router's `observers` (CallObserver: the telemetry export's chat spans).
When no provider has credentials and no local server answers, the embedded model is
used and the user is told once how to configure a real provider; when the configured
default provider cannot answer but another can (a key for another cloud, a running
Ollama or llama.cpp server), that one becomes the default, with a notice. A default
provider the user's own settings name whose key is still to come (`Settings.keys_needed`)
stays the default: calls to it fail saying where to set the key.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import PURPOSES, ModelRef, ProviderConfig
from opencrab.config.provenance import purpose_model
from opencrab.config.secrets import Redactor
from opencrab.errors import LlmError, ProviderNotConfigured
from opencrab.llm.base import LlmProvider
from opencrab.llm.complexity import estimate_complexity
from opencrab.llm.fallback import FallbackPlanner
from opencrab.llm.fallback import Target as Target  # re-exported: callers import it from here
from opencrab.llm.metrics import SYSTEM_AGENT, CallRecord, MetricsRecorder
from opencrab.llm.pricing import PriceBook
from opencrab.llm.registry import build_provider, provider_facts, provider_names
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatChunk, ChatRequest, ChatResponse

log = logging.getLogger(__name__)

EMBEDDED = "embedded"
EMBEDDED_MODEL = "smollm2-135m-instruct"
PROBE_SECS = 5.0  # asking a local server which model it has loaded
DEFAULT_CONTEXT_WINDOW = 32_768  # for models nobody tells us about


def offline_hint() -> str:
    """What the user is told when only the embedded model can answer: the registered
    providers' key variables and local servers (their facts)."""
    facts = provider_facts()
    keys = [f.key_env for f in facts.values() if f.key_env]
    servers = [n for n, f in facts.items() if f.local and f.base_url]
    ways = []
    if keys:
        ways.append("set " + (", ".join(keys[:-1]) + " or " if len(keys) > 1 else "") + keys[-1])
    if servers:
        ways.append("run a local server (" + ", ".join(servers) + ")")
    return (
        "No LLM provider is configured, so OpenCrab uses the small embedded model "
        "(SmolLM2-135M, weak but offline). For a real model "
        + ", or ".join(ways)
        + " (see [llm.providers.*] in the config)."
    )


@dataclass
class StreamResult:
    """Filled in when a routed stream ends: the assembled reply with cost and metrics id."""

    response: ChatResponse | None = None


@dataclass
class CallInfo:
    """Who the call is for; stored with each metrics row."""

    purpose: str = "conversation"
    task_type: str | None = None
    complexity: str | None = None  # None: estimated from the request (llm.complexity)
    agent_id: str | None = None
    session_id: str | None = None
    # when set, a successful attempt's row is appended here instead of queued: the
    # caller writes it with its own records (the turn recorder, with the call's
    # token_usage event, in one transaction); failed attempts are queued as always
    records: list[CallRecord] | None = None
    # what the router's guard needs to know of the call beyond the agent id (the
    # agent's caps, a ticket's cost cap: core/reservations.CallBudget); None: it looks
    budget: object | None = None


class CallGuard(Protocol):
    """Asked before every attempt (LlmRouter.guard): core/reservations.BudgetGuard
    reserves the attempt's estimated cost under the caps that apply, or refuses it.

    Example:
        class Guard:
            async def reserve(self, target, request, info, call_id):
                return False  # True: a reservation under `call_id` holds until the
                              # attempt's metrics row is stored (or `release`)
            def release(self, call_id): ...
        router.guard = Guard()
    """

    async def reserve(
        self, target: Target, request: ChatRequest, info: CallInfo, call_id: str
    ) -> bool:
        """True when a reservation was taken under `call_id`; BudgetExceeded refuses."""
        ...

    def release(self, call_id: str) -> None:
        """Let go of `call_id`'s reservation: the attempt ended without a metrics row."""
        ...


class CallObserver(Protocol):
    """Told of every attempt once it has ended (LlmRouter.observers): the telemetry export
    (opencrab.telemetry) makes a `chat` span of it. Runs on the call's path: it must be
    quick and never raise.

    Example:
        class Observer:
            def call_ended(self, record, info, request, reply):
                print(record.provider, record.model, record.latency_ms, record.status)
        router.observers.append(Observer())
    """

    def call_ended(
        self,
        record: CallRecord,
        info: CallInfo,
        request: ChatRequest,
        reply: ChatResponse | None,
    ) -> None:
        """`record` is the attempt's metrics row (status, latency, usage, error type);
        `reply` the model's answer, None for a failed attempt."""
        ...


class LlmRouter:
    """Routes chat calls to providers with aliases, purposes, fallback and metrics.

    Example:
        router = LlmRouter.from_settings(settings, metrics=MetricsRecorder(db))
        await router.start()
        reply = await router.chat(ChatRequest(model="fast", messages=[Message.user("hi")]))
    """

    def __init__(
        self,
        settings: Settings,
        *,
        metrics: MetricsRecorder | None = None,
        cooldown_secs: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.redactor = Redactor.from_settings(settings)
        """Every configured secret; provider errors pass through it (opencrab.config.secrets)."""
        self.cooldown_secs = cooldown_secs
        self._clock = clock
        self.providers: dict[str, LlmProvider] = {}
        self.aliases: dict[str, Target] = {
            name: Target(ref.provider, ref.model) for name, ref in settings.llm.aliases.items()
        }
        self.fallback_chain: list[str] = list(settings.llm.fallback.chain)
        self.default = Target(settings.llm.default_provider, settings.llm.default_model)
        self._cooling: dict[str, float] = {}
        self.offline = False
        self.notice: str | None = None
        self.usable: frozenset[str] | None = None  # known after start()
        self.key_problems: dict[str, str] = {}
        """Why a provider has no key although one is stored or configured (set by
        opencrab.llm.live_settings): a call to it fails with this reason."""
        self._prices = PriceBook.defaults() if metrics is None else None
        self.planner = FallbackPlanner(self.aliases, self.price_book, self.default_model_for)
        self.before_call: Callable[[], Awaitable[None]] | None = None
        """Awaited before each call: settings changed elsewhere are picked up there
        (opencrab.llm.live_settings checks the stored settings' version)."""
        self.guard: CallGuard | None = None
        """Asked before each attempt: budget reservations (core/reservations.py)."""
        self._calls: dict[LlmProvider, int] = {}  # provider -> calls running on it
        self.retiring: list[LlmProvider] = []
        """Replaced providers with calls still running: closed when the last one ends."""
        self.observers: list[CallObserver] = []
        """Told of every attempt when it ends (opencrab.telemetry's chat spans)."""

    # ------------------------------------------------------------ set-up
    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        metrics: MetricsRecorder | None = None,
        cooldown_secs: float = 30.0,
    ) -> LlmRouter:
        """A router with every registered provider built from its config section."""
        router = cls(settings, metrics=metrics, cooldown_secs=cooldown_secs)
        for name in provider_names():
            config = settings.llm.providers.get(name, ProviderConfig())
            if config.enabled is False:
                continue
            try:
                router.register_provider(build_provider(name, config))
            except ProviderNotConfigured as exc:
                log.info("provider %s unavailable: %s", name, exc)
        return router

    def register_provider(self, provider: LlmProvider) -> None:
        """Route calls to `provider`, reading at most `[llm] max_reply_bytes` of a reply;
        its key and any secret among its own settings are redacted from failures."""
        provider.max_reply_bytes = self.settings.llm.max_reply_bytes
        self.providers[provider.name] = provider
        self.redactor.add(provider.config.api_key)
        for value in vars(provider.options).values():
            if isinstance(value, SecretStr):
                self.redactor.add(value)

    def set_model_alias(self, alias: str, provider: str, model: str) -> None:
        self.aliases[alias] = Target(provider, model)

    def set_fallback_chain(self, chain: list[str]) -> None:
        self.fallback_chain = list(chain)

    def set_aliases(self, aliases: dict[str, Target]) -> None:
        """Replace every alias (in place: the fallback planner reads the same dict)."""
        self.aliases.clear()
        self.aliases.update(aliases)

    async def replace_provider(self, name: str, config: ProviderConfig) -> None:
        """Build `name` again from `config` (a disabled one is dropped); the old
        instance's connections are closed, once the calls running on it have ended (new
        calls go to the new instance). Call `refresh` after the last change."""
        old = self.providers.pop(name, None)
        self._cooling.pop(name, None)
        if config.enabled is not False:
            if name not in provider_names():
                raise ProviderNotConfigured("not registered", provider=name)
            try:
                self.register_provider(build_provider(name, config))
            except ProviderNotConfigured as exc:
                log.info("provider %s unavailable: %s", name, exc)
        if old is not None:
            if old in self._calls:
                self.retiring.append(old)
            else:
                await old.aclose()

    @asynccontextmanager
    async def _using(self, provider: LlmProvider) -> AsyncIterator[None]:
        """Count a call running on `provider`; a replaced one is closed after its last."""
        self._calls[provider] = self._calls.get(provider, 0) + 1
        try:
            yield
        finally:
            left = self._calls.pop(provider) - 1
            if left:
                self._calls[provider] = left
            elif provider in self.retiring:
                self.retiring.remove(provider)
                await provider.aclose()

    async def refresh(self) -> None:
        """Work out again what can answer and the default (after providers changed)."""
        self.offline = False
        self.notice = None
        self.default = Target(self.settings.llm.default_provider, self.settings.llm.default_model)
        await self.start()

    async def start(self) -> None:
        """Find out what can answer; fall back to the embedded model when nothing can.

        What the user should be told about the choice (a refused provider included) is
        left in `notice`, for the caller (the CLI, the server's start-up log) to show
        once. A local server (llama.cpp, Ollama) is asked only when it is used: named by
        the default, the fallback chain or a purpose, or needed because the default
        cannot answer.
        """
        servers = self._local_servers()
        remote = [n for n in self.providers if n not in servers and await self._usable(n, servers)]
        local = [n for n in self.providers if n in servers]
        if self.default.provider in remote:
            local = [n for n in local if n in self._named_providers()]
        usable = [
            n
            for n in self.providers
            if n in remote or (n in local and await self._usable(n, servers))
        ]
        self.usable = frozenset(usable)
        refusals = [p.refused for p in self.providers.values() if p.refused]
        if (
            self.default.provider in self.settings.keys_needed
            and self.default.provider not in usable
        ):
            # the user's own settings name it and its key is still to come: it stays the
            # default, and calls to it fail saying where to set the key (no stand-in)
            self.notice = "\n".join(refusals) or None
            return
        if usable == [EMBEDDED] or (not usable and EMBEDDED in self.providers):
            self.offline = True
            self.default = Target(EMBEDDED, EMBEDDED_MODEL)
            hint = offline_hint()
            self.notice = "\n".join([*refusals, hint])
            log.info(hint)
            return
        self.notice = "\n".join(refusals) or None
        if self.default.provider in usable:
            return
        # The configured default cannot answer: the first usable provider takes its place.
        for name in dict.fromkeys([*self.fallback_chain, *self.providers]):
            if name not in usable or name == EMBEDDED:
                continue
            model = self.default_model_for(name) or await self._first_model(name)
            if model is None:
                continue
            self.notice = "\n".join(
                [
                    *refusals,
                    f"the default provider {self.default.provider!r} is not configured; "
                    f"using {name}/{model} as the default",
                ]
            )
            log.info(self.notice)
            self.default = Target(name, model)
            return

    def _named_providers(self) -> set[str]:
        """The providers the default, the fallback chain and the purposes name."""
        named = {self.default.provider, *self.fallback_chain}
        for purpose in PURPOSES:
            ref = purpose_model(self.settings, purpose)
            if ref is not None:
                named.add(ref.provider)
        return named

    def _local_servers(self) -> set[str]:
        """The providers whose model runs on this machine (`ProviderFacts.local`), asked
        whether they answer before use; the embedded model is the router's own stand-in."""
        registered = provider_facts()
        local = set()
        for name, provider in self.providers.items():
            facts = registered.get(name) or getattr(type(provider), "facts", None)
            if facts is not None and facts.local and name != EMBEDDED:
                local.add(name)
        return local

    async def _usable(self, name: str, servers: set[str] | None = None) -> bool:
        provider = self.providers[name]
        if not provider.is_configured():
            return False
        if name in (self._local_servers() if servers is None else servers):
            return await provider.health_check()
        return True

    async def _first_model(self, name: str) -> str | None:
        """The first model a provider lists (a local server's loaded model), if any."""
        try:
            async with asyncio.timeout(PROBE_SECS):
                models = await self.providers[name].available_models()
        except (LlmError, TimeoutError) as exc:
            log.info("provider %s lists no models: %s", name, exc)
            return None
        return models[0].id if models else None

    async def aclose(self) -> None:
        """Close every provider's connections (replaced ones still in use included)."""
        for provider in [*self.providers.values(), *self.retiring]:
            await provider.aclose()
        self.retiring.clear()

    # ------------------------------------------------------------ resolution
    def resolve(self, reference: str | None = None, purpose: str | None = None) -> Target:
        """The target for a model reference (alias, provider/model, model) or a purpose."""
        if reference:
            if reference in self.aliases:
                target = self.aliases[reference]
            elif "/" in reference and reference.split("/", 1)[0] in self.providers:
                provider, model = reference.split("/", 1)
                target = Target(provider, model)
            else:
                return self.default if self.offline else Target(self.default.provider, reference)
            return self.default if self.offline and target.provider != EMBEDDED else target
        if self.offline:
            return self.default
        if purpose in PURPOSES:
            ref = purpose_model(self.settings, purpose)
            if ref is not None and (self.usable is None or ref.provider in self.usable):
                return Target(ref.provider, ref.model)
        return self.default

    def default_model_for(self, provider: str) -> str | None:
        """The model to use on `provider` when falling back to it."""
        config = self.settings.llm.providers.get(provider)
        if config is not None and config.default_model:
            return config.default_model
        if provider == EMBEDDED:
            return EMBEDDED_MODEL
        if provider == self.settings.llm.default_provider:
            return self.settings.llm.default_model
        for purpose in PURPOSES:
            ref: ModelRef | None = getattr(self.settings.llm.models, purpose)
            if ref is not None and ref.provider == provider:
                return ref.model
        for target in self.aliases.values():
            if target.provider == provider:
                return target.model
        return None

    def price_book(self) -> PriceBook | None:
        """The price table calls are costed with (the metrics recorder's, else the defaults)."""
        return self.metrics.prices if self.metrics is not None else self._prices

    def context_window(self, target: Target) -> int:
        """The target model's context window: from its provider, the price table, or 32k."""
        provider = self.providers.get(target.provider)
        window = provider.context_window(target.model) if provider is not None else None
        if window is None:
            prices = self.metrics.prices if self.metrics is not None else self._prices
            price = prices.find(target.provider, target.model) if prices is not None else None
            window = price.context_window if price is not None else None
        return window or DEFAULT_CONTEXT_WINDOW

    def candidates(self, first: Target) -> list[Target]:
        """The primary target, one per fallback entry, the default; cooling ones last.

        A bare provider in the chain gives its model of `first`'s tier, never a pricier
        one (opencrab.llm.fallback); an alias or provider/model entry is used as named.
        """
        return self._ordered(first, self._clock(), dict(self._cooling))

    def _attempts(self, first: Target) -> Iterator[Target]:
        """`candidates(first)` in order, the fallbacks worked out only when reached.

        Most calls succeed on their first target; planning the chain (tiers, prices) for
        each would cost more than the router's own work. The cooling state is read once,
        up front, so the order is exactly that of `candidates` at the call's start.
        """
        now, cooling = self._clock(), dict(self._cooling)
        if cooling.get(first.provider, 0.0) > now:
            yield from self._ordered(first, now, cooling)
            return
        yield first
        yield from self._ordered(first, now, cooling)[1:]  # [0] is `first`: it is ready

    def _ordered(self, first: Target, now: float, cooling: dict[str, float]) -> list[Target]:
        targets = [first]
        for entry in self.fallback_chain:
            bare = entry not in self.aliases and "/" not in entry
            if bare and entry == first.provider:
                continue
            target = self.planner.target(entry, first, self.providers)
            if target is not None and target not in targets:
                targets.append(target)
        if self.default.provider not in {t.provider for t in targets}:
            targets.append(self.default)
        if self.offline and all(t.provider != EMBEDDED for t in targets):
            targets.append(Target(EMBEDDED, EMBEDDED_MODEL))
        ready = [t for t in targets if cooling.get(t.provider, 0.0) <= now]
        waiting = [t for t in targets if t not in ready]
        return ready + waiting

    # ------------------------------------------------------------ calls
    async def chat(self, request: ChatRequest, info: CallInfo | None = None) -> ChatResponse:
        """Complete a chat; `request.model` may be an alias, provider/model or empty."""
        info = info or CallInfo()
        if self.before_call is not None:
            await self.before_call()
        first = self.resolve(request.model, info.purpose)
        return await self._run(self._attempts(first), request, info)

    async def chat_with_provider(
        self, provider: str, request: ChatRequest, info: CallInfo | None = None
    ) -> ChatResponse:
        """Complete a chat on one provider, without fallback."""
        if self.before_call is not None:
            await self.before_call()
        model = request.model or self.default_model_for(provider) or ""
        return await self._run([Target(provider, model)], request, info or CallInfo())

    async def _run(
        self, targets: Iterable[Target], request: ChatRequest, info: CallInfo
    ) -> ChatResponse:
        request_id = str(uuid.uuid4())
        last: LlmError | None = None
        tried: list[Target] = []
        for target in targets:
            provider = self.providers.get(target.provider)
            if provider is None or not provider.is_configured() or provider.refused:
                # a real failure of an earlier target says more than "not configured"
                last = last or self._unusable(target.provider, provider)
                continue
            record = self._record(target, info, request, request_id, tried, stream=False)
            await self._reserve(record, target, request, info)
            tried.append(target)
            start = time.perf_counter()
            try:
                async with self._using(provider):
                    reply = await provider.chat_completion(
                        request.model_copy(update={"model": target.model})
                    )
            except LlmError as exc:
                self._failed(record, exc, start)
                self._observe(record, info, request, None)
                last = exc
                if self._gives_up(exc):
                    raise
                continue
            except BaseException:  # cancelled: no metrics row will settle the reservation
                self._let_go(record)
                raise
            record.latency_ms = _ms(start)
            self._finish(record, reply, info)
            reply.metrics_id = record.id
            reply.latency_ms = record.latency_ms
            self._observe(record, info, request, reply)
            return reply
        assert last is not None, "no provider to try"
        raise last

    async def stream(
        self,
        request: ChatRequest,
        info: CallInfo | None = None,
        result: StreamResult | None = None,
    ) -> AsyncGenerator[ChatChunk, None]:
        """Stream a chat; falls back only until the first chunk has been passed on."""
        info = info or CallInfo()
        if self.before_call is not None:
            await self.before_call()
        request_id = str(uuid.uuid4())
        last: LlmError | None = None
        targets = self._attempts(self.resolve(request.model, info.purpose))
        tried: list[Target] = []
        for target in targets:
            provider = self.providers.get(target.provider)
            if provider is None or not provider.is_configured() or provider.refused:
                # a real failure of an earlier target says more than "not configured"
                last = last or self._unusable(target.provider, provider)
                continue
            record = self._record(target, info, request, request_id, tried, stream=True)
            await self._reserve(record, target, request, info)
            tried.append(target)
            acc = StreamAccumulator(provider=target.provider, model=target.model)
            start = time.perf_counter()
            started = False
            try:
                async with self._using(provider):
                    async for chunk in provider.chat_completion_stream(
                        request.model_copy(update={"model": target.model})
                    ):
                        if not started and (chunk.text or chunk.tool_calls or chunk.reasoning):
                            record.time_to_first_token_ms = _ms(start)
                            started = True
                        acc.add(chunk)
                        yield chunk
            except LlmError as exc:
                self._failed(record, exc, start, acc)
                self._observe(record, info, request, None)
                last = exc
                if started or self._gives_up(exc):
                    raise
                continue
            except BaseException:  # cancelled or closed early: no metrics row settles it
                self._let_go(record)
                raise
            record.latency_ms = _ms(start)
            reply = acc.response()
            self._finish(record, reply, info)
            reply.metrics_id, reply.latency_ms = record.id, record.latency_ms
            self._observe(record, info, request, reply)
            if result is not None:
                result.response = reply
            return
        assert last is not None, "no provider to try"
        raise last

    # ------------------------------------------------------------ bookkeeping
    async def _reserve(
        self, record: CallRecord, target: Target, request: ChatRequest, info: CallInfo
    ) -> None:
        """Ask the guard before an attempt (BudgetExceeded refuses it, with no row)."""
        if self.guard is not None:
            record.reserved = await self.guard.reserve(target, request, info, record.id)

    def _observe(
        self, record: CallRecord, info: CallInfo, request: ChatRequest, reply: ChatResponse | None
    ) -> None:
        for observer in self.observers:
            try:
                observer.call_ended(record, info, request, reply)
            except Exception:  # an observer's bug never fails the call
                log.exception("call observer %r failed", observer)

    def _let_go(self, record: CallRecord) -> None:
        if record.reserved and self.guard is not None:
            self.guard.release(record.id)

    def _unusable(self, name: str, provider: LlmProvider | None) -> ProviderNotConfigured:
        """Why a target's provider is skipped without a call."""
        if provider is None:
            return ProviderNotConfigured("not registered", provider=name)
        if provider.refused:
            return ProviderNotConfigured(provider.refused)
        if name in self.key_problems:
            return ProviderNotConfigured(self.key_problems[name], provider=name)
        if name in self.settings.keys_needed:  # used, and no key was given anywhere yet
            return ProviderNotConfigured(self.settings.keys_needed[name], provider=name)
        return ProviderNotConfigured("not configured (no key or model)", provider=name)

    def _gives_up(self, exc: LlmError) -> bool:
        if exc.retryable:
            if exc.provider:
                self._cooling[exc.provider] = self._clock() + self.cooldown_secs
            return False
        return not isinstance(exc, ProviderNotConfigured)

    def _record(
        self,
        target: Target,
        info: CallInfo,
        request: ChatRequest,
        request_id: str,
        tried: list[Target],
        *,
        stream: bool,
    ) -> CallRecord:
        """The metrics row of an attempt: which one it is and, after a failure, from what."""
        return CallRecord(
            id=str(uuid.uuid4()),
            provider=target.provider,
            model=target.model,
            purpose=info.purpose,
            agent_id=info.agent_id or SYSTEM_AGENT,
            session_id=info.session_id,
            task_type=info.task_type,
            complexity=info.complexity or estimate_complexity(request),
            stream=stream,
            request_id=request_id,
            attempt=len(tried) + 1,
            fallback_from=str(tried[-1]) if tried else None,
        )

    def _finish(self, record: CallRecord, reply: ChatResponse, info: CallInfo) -> None:
        record.set_usage(reply.usage)
        prices = self.metrics.prices if self.metrics is not None else self._prices
        assert prices is not None
        cost, source = prices.cost(record.provider, record.model, reply.usage, reply.cost_usd)
        record.estimated_cost_usd, record.cost_source = cost, source
        reply.cost_usd = cost
        if self.metrics is None:  # no row will settle a reservation
            self._let_go(record)
            return
        if info.records is not None:
            info.records.append(record)
        else:
            self.metrics.record(record)

    def _failed(
        self,
        record: CallRecord,
        exc: LlmError,
        start: float,
        acc: StreamAccumulator | None = None,
    ) -> None:
        self.redactor.redact_error(exc)  # a provider may echo the key in its error body
        record.latency_ms = _ms(start)
        record.status = "error"
        record.error_type = exc.code
        record.error = str(exc)
        if acc is not None and acc.usage is not None:
            record.set_usage(acc.usage)
        if self.metrics is not None:
            self.metrics.record(record)
        else:
            self._let_go(record)


def _ms(start: float) -> int:
    return round((time.perf_counter() - start) * 1000)
