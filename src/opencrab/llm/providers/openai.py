"""OpenAI (and Azure OpenAI) through the official `openai` SDK's Chat Completions API.

The wire mapping (messages, tools, usage, finish reasons, errors) lives in
`openai_wire`; this module owns the client. Decisions:

- SDK retries are off (`max_retries=0`): the router is the one retry and fallback loop.
- Timeouts: `request.timeout` (else `timeout_secs`) bounds a whole non-streamed call and,
  for a stream, the wait for the response to start; the SDK gets the same value as its
  per-read timeout, so a stream that goes silent that long fails too.
- `max_tokens` is sent as `max_completion_tokens`: the SDK marks `max_tokens` deprecated
  and the o-series and GPT-5 reasoning models reject it. OpenAI-compatible servers that
  only know `max_tokens` override `max_tokens_param`.
- Streams ask for `stream_options.include_usage`, so usage arrives on a last chunk with
  no choices. A stream is complete once a finish reason arrived and it then ended
  cleanly; a connection dropped at any point, or an end without a finish reason, is
  StreamInterrupted.
- Azure OpenAI: with `api_version` set the Azure client is used, `base_url` is the
  resource endpoint and the request model names the deployment
  (`/openai/deployments/<model>/chat/completions?api-version=…`, `api-key` header).
  Azure's v1 endpoint (`base_url` ending in `/openai/v1`) takes the plain client.
- Subclasses (OpenRouter, llama.cpp) change only the hooks: base URL, headers, extra body
  fields, cost and model-list parsing.
- The SDK (and `openai_wire`, which maps its types) is imported when the provider is
  first used, so its facts are known without the `openai` extra installed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, ClassVar

from opencrab.config.models import ProviderConfig
from opencrab.config.providers import Price, ProviderFacts, ProviderOptions
from opencrab.errors import LlmError, ProviderNotConfigured, StreamInterrupted
from opencrab.llm.base import LlmProvider
from opencrab.llm.types import ChatChunk, ChatRequest, ChatResponse, ModelInfo

if TYPE_CHECKING:
    from openai import AsyncOpenAI

KNOWN_MODELS: dict[str, tuple[int, bool, bool]] = {
    "gpt-5.2": (256_000, True, True),
    "gpt-5.2-pro": (256_000, True, True),
    "gpt-5-mini": (128_000, True, True),
    "gpt-4o": (128_000, True, True),
    "gpt-4o-mini": (128_000, True, True),
    "o1": (200_000, True, False),
}
"""id → (context window, vision, function calling); dated snapshots share their base's entry."""

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class OpenAIOptions(ProviderOptions):
    """`[llm.providers.openai]` settings of OpenAI's own."""

    organization: str | None = None  # sent as OpenAI-Organization
    api_version: str | None = None  # Azure OpenAI: set, requests use the Azure client


class OpenAIProvider(LlmProvider):
    """OpenAI's Chat Completions API; Azure OpenAI when `api_version` is configured.

    Example:
        provider = OpenAIProvider(ProviderConfig(api_key=SecretStr("sk-…")))
        reply = await provider.chat_completion(
            ChatRequest(model="gpt-5-mini", messages=[Message.user("Hi")])
        )
    """

    name = "openai"
    # seed 001, February 2026; cache reads as OpenAI published them
    facts = ProviderFacts(
        key_env="OPENAI_API_KEY",
        prices=(
            Price("gpt-5.2", 1.75, 14.00, 256_000, cache_read_per_1m=0.175),
            Price("gpt-5.2-pro", 21.00, 168.00, 256_000),
            Price("gpt-5-mini", 0.25, 2.00, 128_000, cache_read_per_1m=0.025),
        ),
        options=OpenAIOptions,
        libraries=("openai",),
        extra="openai",
    )
    options: OpenAIOptions
    default_base_url: ClassVar[str | None] = None  # None: the SDK's (api.openai.com)
    vendor_url: ClassVar[str | None] = "https://api.openai.com/v1"
    max_tokens_param: ClassVar[str] = "max_completion_tokens"
    azure_capable: ClassVar[bool] = True
    health_timeout_secs: float = 5.0  # instances may lower it

    def __init__(self, config: ProviderConfig | None = None, *, name: str | None = None) -> None:
        super().__init__(config, name=name)
        self._sdk: AsyncOpenAI | None = None

    # ---------------------------------------------------------------- hooks
    def base_url(self) -> str | None:
        """The URL the SDK client talks to."""
        return self.config.base_url or self.default_base_url

    def client_api_key(self) -> str:
        """The key the client sends (ProviderNotConfigured when there is none)."""
        return self.api_key()

    def default_headers(self) -> dict[str, str]:
        """Headers sent with every request."""
        return {}

    def extra_body(self, request: ChatRequest) -> dict[str, Any]:
        """Fields added to every chat request body beyond the OpenAI schema."""
        return {}

    def cost_from(self, raw_usage: dict[str, Any] | None) -> float | None:
        """The cost the provider reports in its usage object, if it does."""
        return None

    def model_info(self, raw: dict[str, Any]) -> ModelInfo:
        """A ModelInfo from one entry of the models list."""
        model_id = str(raw["id"])
        known = KNOWN_MODELS.get(model_id) or KNOWN_MODELS.get(_SNAPSHOT.sub("", model_id))
        if known is None:
            return ModelInfo(id=model_id, provider=self.name)
        window, vision, functions = known
        return ModelInfo(
            id=model_id,
            provider=self.name,
            context_window=window,
            supports_vision=vision,
            supports_functions=functions,
        )

    # ---------------------------------------------------------------- client
    def is_configured(self) -> bool:
        """True when an API key is set (and, for Azure, the endpoint)."""
        key = self.config.api_key
        has_key = key is not None and bool(key.get_secret_value())
        return has_key and (bool(self.config.base_url) or not self.is_azure)

    @property
    def is_azure(self) -> bool:
        """True when requests go to Azure OpenAI's deployments API."""
        base = (self.config.base_url or "").rstrip("/")
        azure = self.azure_capable and bool(self.options.api_version)
        return azure and not base.endswith("/openai/v1")

    def client(self) -> AsyncOpenAI:
        """The SDK client, built on first use."""
        if self._sdk is None:
            self._sdk = self._new_client()
        return self._sdk

    def _new_client(self) -> AsyncOpenAI:
        from openai import AsyncAzureOpenAI, AsyncOpenAI, DefaultAsyncHttpxClient

        headers = self.default_headers() or None
        if self.is_azure:
            if not self.config.base_url:
                raise ProviderNotConfigured(
                    f"Azure OpenAI needs its endpoint; set llm.providers.{self.name}.base_url",
                    provider=self.name,
                )
            return AsyncAzureOpenAI(
                azure_endpoint=self.config.base_url,
                api_version=self.options.api_version,
                api_key=self.client_api_key(),
                organization=self.options.organization,
                timeout=self.config.timeout_secs,
                max_retries=0,
                default_headers=headers,
                http_client=DefaultAsyncHttpxClient(event_hooks=self.http_hooks()),
            )
        return AsyncOpenAI(
            api_key=self.client_api_key(),
            base_url=self.base_url(),
            organization=self.options.organization,
            timeout=self.config.timeout_secs,
            max_retries=0,
            default_headers=headers,
            http_client=DefaultAsyncHttpxClient(event_hooks=self.http_hooks()),
        )

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        from opencrab.llm.providers.openai_wire import wire_messages, wire_tool_choice, wire_tools

        params: dict[str, Any] = {
            "model": request.model,
            "messages": wire_messages(request.messages),
        }
        # the tools go in the body as built: the SDK's transform of a request walks every
        # schema of every tool on every call (about 1.4 ms for 30 tools, a tenth of a
        # ticket's CPU) to give back the same JSON (wire_tools' output is plain JSON with
        # no aliased fields); extra_body is sent untransformed
        extra: dict[str, Any] = {}
        if request.tools:
            extra["tools"] = wire_tools(request.tools)
            if request.tool_choice is not None:
                params["tool_choice"] = wire_tool_choice(request.tool_choice)
        params.update(request.sampling(self.max_tokens_param))
        extra.update(self.extra_body(request))
        if extra:
            params["extra_body"] = extra
        return params

    # ---------------------------------------------------------------- calls
    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        """One complete reply."""
        from opencrab.llm.providers.openai_wire import SDK_ERRORS, response_from

        timeout = self.timeout_for(request)
        try:
            async with asyncio.timeout(timeout):
                completion = await self.client().chat.completions.create(
                    **self._params(request), stream=False, timeout=timeout
                )
        except SDK_ERRORS as exc:
            raise self._error(exc, request) from exc
        reply = response_from(completion, provider=self.name, model=request.model)
        reply.cost_usd = self.cost_from(reply.usage.raw)
        return reply

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as the server streams it; usage comes on the last chunk."""
        from opencrab.llm.providers.openai_wire import SDK_ERRORS, chunk_from, is_empty

        timeout = self.timeout_for(request)
        try:
            async with asyncio.timeout(timeout):
                stream = await self.client().chat.completions.create(
                    **self._params(request),
                    stream=True,
                    stream_options={"include_usage": True},
                    timeout=timeout,
                )
        except SDK_ERRORS as exc:
            raise self._error(exc, request) from exc
        finished = False
        try:
            async for event in stream:
                chunk = chunk_from(event, provider=self.name, model=request.model)
                if chunk.usage is not None:
                    chunk.cost_usd = self.cost_from(chunk.usage.raw)
                finished = finished or chunk.finish_reason is not None
                if not is_empty(chunk):
                    yield chunk
        except SDK_ERRORS as exc:
            raise self._error(exc, request, streaming=True) from exc
        finally:
            await stream.close()
        if not finished:
            raise StreamInterrupted(
                "the stream ended without a finish reason", provider=self.name, model=request.model
            )

    def _error(
        self, exc: BaseException, request: ChatRequest, *, streaming: bool = False
    ) -> LlmError:
        from opencrab.llm.providers.openai_wire import error_from

        return error_from(exc, provider=self.name, model=request.model, streaming=streaming)

    async def available_models(self) -> list[ModelInfo]:
        """The models the server lists."""
        from opencrab.llm.providers.openai_wire import SDK_ERRORS, error_from

        try:
            raw = [m.to_dict(mode="json") async for m in self.client().models.list()]
        except SDK_ERRORS as exc:
            raise error_from(exc, provider=self.name, model=None, streaming=False) from exc
        return [self.model_info(item) for item in raw if isinstance(item.get("id"), str)]

    async def health_check(self) -> bool:
        """True when the models list answers within a few seconds; never raises."""
        timeout = min(self.health_timeout_secs, self.config.timeout_secs)
        try:
            async with asyncio.timeout(timeout):
                await self.client().models.list(timeout=timeout)
        except Exception:
            return False
        return True

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        if self._sdk is not None:
            sdk, self._sdk = self._sdk, None
            await sdk.close()
