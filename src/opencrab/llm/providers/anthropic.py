"""Anthropic's Claude through the official `anthropic` SDK's Messages API.

The wire mapping lives in `anthropic_wire`; this module owns the client. Decisions:

- SDK retries are off (`max_retries=0`): the router is the one retry and fallback loop.
  `base_url` overrides the SDK's default (https://api.anthropic.com).
- Timeouts: `request.timeout` (else `timeout_secs`) bounds a whole non-streamed call and,
  for a stream, the wait for the response to start; the SDK gets the same value as its
  per-read timeout, so a stream that goes silent that long fails too.
- Messages: system messages are joined (blank line between) into the top-level `system`
  parameter. Tool results become `tool_result` blocks (`tool_use_id`, text `content`,
  `is_error`) in a user turn; assistant tool calls become `tool_use` blocks whose `input`
  is the arguments object ({} when the arguments are not a JSON object). Anthropic wants
  user and assistant turns to alternate, so consecutive turns of one role are merged,
  with tool_result blocks moved to the front of their user turn as the API requires.
  Empty text is left out (the API refuses empty text blocks and empty turns).
- Images: data URLs → `base64` sources, http(s) URLs → `url` sources; any other URL is
  ProviderBadRequest before anything is sent. Images in assistant turns are dropped.
- Tools: `{name, description, input_schema}`; `tool_choice` auto/none as is, required →
  `any`, a tool name → `{"type": "tool", "name": …}` (sent only together with tools).
- `max_tokens` is required by Anthropic: 4096 when the request sets none. `stop` →
  `stop_sequences`. `temperature` is not sent: API version 2026-10-21 (the default of
  SDK 2.x, which no longer has the parameter) refuses it, even at 1.0.
- Replies: text blocks are joined; `tool_use` blocks → ToolCalls (`raw_arguments` None:
  the wire has an object, not text); thinking and server-tool blocks are left out (in a
  stream, thinking deltas are `reasoning`). Stop reasons: end_turn, stop_sequence and
  pause_turn → stop; max_tokens and model_context_window_exceeded → length; tool_use →
  tool_calls; refusal → content_filter. The raw value is `raw_finish_reason`.
- Usage: Anthropic's `input_tokens` exclude cache reads and writes, so `input_tokens` =
  input + cache_read_input_tokens + cache_creation_input_tokens, with the two cache
  counts in `cache_read_tokens` / `cache_write_tokens`; `output_tokens_details.
  thinking_tokens` is `reasoning_tokens`; `raw` is the usage object as sent (in a stream,
  message_start's usage updated by message_delta's cumulative counts).
- Streams: each tool_use block gets the next tool-call index; its id and name come on
  the block's start, its `input_json_delta` fragments as arguments. The closing chunk
  (finish reason and usage) is yielded on message_stop; a stream that ends before it,
  or whose connection drops, is StreamInterrupted. An SSE `error` event maps by its
  error type (overloaded_error → ProviderServerError, rate_limit_error → RateLimited, …).
- Errors: HTTP statuses through `llm_error_for_status` (401/403 auth, 429 rate limit,
  529 and 5xx server, other 4xx bad request); timeouts → ProviderTimeout; connection
  errors → ProviderUnreachable; bodies or events that do not parse → MalformedResponse.
- Models: GET /v1/models; the context window is the listed `max_input_tokens`, else a
  small built-in table (`anthropic_wire.CONTEXT_WINDOWS`).
- The SDK (and `anthropic_wire`, which maps its types) is imported when the provider is
  first used, so its facts are known without the `anthropic` extra installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, ClassVar

from opencrab.config.models import ProviderConfig
from opencrab.config.providers import Price, ProviderFacts
from opencrab.errors import LlmError, StreamInterrupted
from opencrab.llm.base import LlmProvider
from opencrab.llm.types import ChatChunk, ChatRequest, ChatResponse, ModelInfo

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

MAX_MODEL_PAGES = 20


class AnthropicProvider(LlmProvider):
    """Claude models through Anthropic's Messages API.

    Example:
        provider = AnthropicProvider(ProviderConfig(api_key=SecretStr("sk-ant-…")))
        reply = await provider.chat_completion(
            ChatRequest(model="claude-sonnet-4-5", messages=[Message.user("Hi")])
        )
    """

    name = "anthropic"
    # seed 001, February 2026; cache reads and writes as Anthropic published them
    facts = ProviderFacts(
        key_env="ANTHROPIC_API_KEY",
        prices=(
            Price("claude-opus-4.6", 5.00, 25.00, 1_000_000, 0.50, 6.25),
            Price("claude-sonnet-4.5", 3.00, 15.00, 1_000_000, 0.30, 3.75),
            Price("claude-haiku-4.5", 1.00, 5.00, 200_000, 0.10, 1.25),
        ),
        libraries=("anthropic",),
        extra="anthropic",
    )
    vendor_url: ClassVar[str | None] = "https://api.anthropic.com"  # the SDK's default
    health_timeout_secs: float = 5.0

    def __init__(self, config: ProviderConfig | None = None, *, name: str | None = None) -> None:
        super().__init__(config, name=name)
        self._sdk: AsyncAnthropic | None = None

    def is_configured(self) -> bool:
        """True when an API key is set."""
        key = self.config.api_key
        return key is not None and bool(key.get_secret_value())

    def client(self) -> AsyncAnthropic:
        """The SDK client, built on first use (ProviderNotConfigured without a key)."""
        from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

        if self._sdk is None:
            self._sdk = AsyncAnthropic(
                api_key=self.api_key(),
                base_url=self.config.base_url or None,
                timeout=self.config.timeout_secs,
                max_retries=0,
                http_client=DefaultAsyncHttpxClient(event_hooks=self.http_hooks()),
            )
        return self._sdk

    # ---------------------------------------------------------------- calls
    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        """One complete reply."""
        from opencrab.llm.providers.anthropic_wire import SDK_ERRORS, response_from, wire_params

        timeout = self.timeout_for(request)
        try:
            async with asyncio.timeout(timeout):
                message = await self.client().messages.create(
                    **wire_params(request), stream=False, timeout=timeout
                )
        except SDK_ERRORS as exc:
            raise self._error(exc, request) from exc
        return response_from(message, provider=self.name, model=request.model)

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as the server streams it; finish reason and usage come last."""
        from opencrab.llm.providers.anthropic_wire import SDK_ERRORS, StreamState, wire_params

        timeout = self.timeout_for(request)
        try:
            async with asyncio.timeout(timeout):
                stream = await self.client().messages.create(
                    **wire_params(request), stream=True, timeout=timeout
                )
        except SDK_ERRORS as exc:
            raise self._error(exc, request) from exc
        state = StreamState(provider=self.name, model=request.model)
        try:
            async for event in stream:
                chunk = state.chunk(event)
                if chunk is not None:
                    yield chunk
                if state.finished:
                    break
        except SDK_ERRORS as exc:
            raise self._error(exc, request, streaming=True) from exc
        finally:
            await stream.close()
        if not state.finished:
            raise StreamInterrupted(
                "the stream ended before message_stop", provider=self.name, model=request.model
            )

    def _error(
        self, exc: BaseException, request: ChatRequest, *, streaming: bool = False
    ) -> LlmError:
        from opencrab.llm.providers.anthropic_wire import error_from

        return error_from(exc, provider=self.name, model=request.model, streaming=streaming)

    # ---------------------------------------------------------------- models
    async def available_models(self) -> list[ModelInfo]:
        """The models GET /v1/models lists."""
        from opencrab.llm.providers.anthropic_wire import SDK_ERRORS, error_from, model_info

        models: list[ModelInfo] = []
        try:
            page = await self.client().models.list(limit=1000)
            for _ in range(MAX_MODEL_PAGES):
                models += [model_info(m, provider=self.name) for m in page.data or []]
                if not page.has_next_page():
                    break
                page = await page.get_next_page()
        except (*SDK_ERRORS, AttributeError, TypeError) as exc:
            raise error_from(exc, provider=self.name, model=None, streaming=False) from exc
        return models

    async def health_check(self) -> bool:
        """True when the models list answers within a few seconds; never raises."""
        timeout = min(self.health_timeout_secs, self.config.timeout_secs)
        try:
            async with asyncio.timeout(timeout):
                await self.client().models.list(limit=1, timeout=timeout)
        except Exception:
            return False
        return True

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        if self._sdk is not None:
            sdk, self._sdk = self._sdk, None
            await sdk.close()
