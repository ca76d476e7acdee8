"""Google Gemini through its REST API (v1beta `generateContent`), with plain httpx.

The wire mapping lives in `google_wire`; this module owns the calls. Decisions:

- Authentication is the `x-goog-api-key` header (never the `?key=` query, which ends up
  in logs). `base_url` overrides https://generativelanguage.googleapis.com.
- Messages: system messages become `systemInstruction`; assistant turns are role
  "model"; tool results are `functionResponse` parts in a "user" turn, their response
  `{"output": text}` or `{"error": text}` (Gemini's documented keys). Gemini needs the
  function's name there: the tool message's `name`, else the name of the assistant call
  with that `tool_call_id`. Consecutive turns of one role are merged, as Gemini wants
  user and model turns to alternate.
- Tool-call ids: Gemini gives calls no ids, so ToolCalls get generated `call_…` ids, and
  no id is sent back (ids in functionCall/functionResponse are refused by some Google
  endpoints); calls and results are matched by name and order, as Gemini does.
- Thought signatures: Gemini 3 rejects a history whose function calls lack the
  `thoughtSignature` they came with. The neutral ToolCall has no field for it, so the
  provider remembers signatures by ToolCall id (bounded, in memory) and sends them back;
  a call it has no signature for (another process, another provider) carries Google's
  documented stand-in `skip_thought_signature_validator` on the first call of its turn.
- Images: data URLs → `inlineData`; other URLs → `fileData` with the MIME type guessed
  from the URL's extension (image/jpeg when it has none).
- Tools: `parameters` follow Gemini's OpenAPI-style Schema, which refuses unknown keys,
  so JSON Schema is reduced to the keys it knows (`$schema`, `additionalProperties`,
  `$ref`, `default`, `examples`, unsupported `format`s … are dropped), `type: [x, "null"]`
  becomes `nullable`, `oneOf` becomes `anyOf`, `const` becomes a one-value `enum`; a
  function without parameters gets none (Gemini refuses an object with no properties).
  `tool_choice`: auto/none/required → AUTO/NONE/ANY; a name → ANY limited to it.
- Replies: `thought` parts never reach the text; in a stream they are `reasoning`.
  STOP with function calls is "tool_calls"; MAX_TOKENS "length"; SAFETY, RECITATION,
  BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY "content_filter"; anything else
  (MALFORMED_FUNCTION_CALL, OTHER, …) "error". A blocked prompt (no candidates, a
  `promptFeedback.blockReason`) is ProviderBadRequest naming the reason.
- Usage: `promptTokenCount` already includes `cachedContentTokenCount`;
  `candidatesTokenCount` excludes `thoughtsTokenCount`, which is added to the output.
- Streams use `:streamGenerateContent?alt=sse`; function calls arrive whole, each as one
  ToolCallDelta. Usage and finish reason of the last events come on a closing chunk; a
  stream that ends before any finish reason is StreamInterrupted.
- Errors: Google's `{"error": {"code", "message", "status"}}` message is kept; a 400
  about the API key (Google's answer to a bad key) is ProviderAuthError.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, ClassVar

from opencrab.config.models import ProviderConfig
from opencrab.config.providers import Price, ProviderFacts
from opencrab.errors import LlmError, ProviderAuthError, ProviderBadRequest, StreamInterrupted
from opencrab.llm.providers.google_wire import (
    SignatureMemory,
    StreamState,
    model_info,
    response_from,
    wire_request,
)
from opencrab.llm.providers.httpx_provider import HttpxProvider
from opencrab.llm.providers.sse import iter_sse_data
from opencrab.llm.types import ChatChunk, ChatRequest, ChatResponse, ModelInfo

MAX_MODEL_PAGES = 50


class GoogleProvider(HttpxProvider):
    """Gemini models through the Gemini API.

    Example:
        provider = GoogleProvider(ProviderConfig(api_key=SecretStr("AIza…")))
        reply = await provider.chat_completion(
            ChatRequest(model="gemini-2.5-flash", messages=[Message.user("Hi")])
        )
    """

    name = "google"
    # seed 001, February 2026; cache reads as Google published them
    facts = ProviderFacts(
        key_env="GOOGLE_API_KEY",
        prices=(
            Price("gemini-3-pro", 2.00, 12.00, 1_000_000, cache_read_per_1m=0.20),
            Price("gemini-3-flash", 0.50, 3.00, 1_000_000, cache_read_per_1m=0.05),
            Price("gemini-2.5-flash-lite", 0.10, 0.40, 128_000, cache_read_per_1m=0.01),
        ),
    )
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com"
    vendor_url: ClassVar[str | None] = default_base_url

    def __init__(self, config: ProviderConfig | None = None, *, name: str | None = None) -> None:
        super().__init__(config, name=name)
        self.signatures = SignatureMemory()

    def headers(self) -> dict[str, str]:
        """The API key header (ProviderNotConfigured when no key is set)."""
        return {"x-goog-api-key": self.api_key()}

    def is_configured(self) -> bool:
        """True when an API key is set."""
        key = self.config.api_key
        return key is not None and bool(key.get_secret_value())

    def error_for_status(self, status: int, message: str, model: str) -> LlmError:
        """Google answers a bad or expired key with 400; that is an auth error."""
        if status == 400 and "api key" in message.lower():
            return ProviderAuthError(
                f"HTTP 400: {message}; check llm.providers.{self.name}.api_key",
                provider=self.name,
                model=model,
                status=status,
            )
        return super().error_for_status(status, message, model)

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        try:
            return wire_request(request, self.signatures)
        except ValueError as exc:
            raise ProviderBadRequest(str(exc), provider=self.name, model=request.model) from exc

    @staticmethod
    def model_path(model: str) -> str:
        """`/v1beta/models/<model>` (a `models/…` or `tunedModels/…` name is kept as is)."""
        resource = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
        return f"/v1beta/{resource}"

    # ---------------------------------------------------------------- calls
    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        """One complete reply."""
        body = await self.send_json(
            "POST",
            f"{self.model_path(request.model)}:generateContent",
            self._body(request),
            model=request.model,
            timeout=self.timeout_for(request),
        )
        return response_from(
            body, provider=self.name, model=request.model, signatures=self.signatures
        )

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as Gemini streams it (SSE); finish reason and usage come last."""
        state = StreamState(provider=self.name, model=request.model, signatures=self.signatures)
        payloads = self.stream_payloads(
            f"{self.model_path(request.model)}:streamGenerateContent",
            self._body(request),
            params={"alt": "sse"},
            model=request.model,
            timeout=self.timeout_for(request),
            reader=iter_sse_data,
        )
        async with aclosing(payloads):
            async for payload in payloads:
                event = self.decode(payload, request.model)
                if isinstance(event.get("error"), dict):
                    raise self._stream_error(event["error"], request.model)
                chunk = state.chunk(event)
                if chunk.text or chunk.reasoning or chunk.tool_calls:
                    yield chunk
        if state.raw_finish is None:
            raise StreamInterrupted(
                "the stream ended without a finish reason", provider=self.name, model=request.model
            )
        yield state.final()

    def _stream_error(self, error: dict[str, Any], model: str) -> LlmError:
        code = error.get("code")
        status = code if isinstance(code, int) and code >= 400 else 500
        return self.error_for_status(status, str(error.get("message") or error), model)

    async def available_models(self) -> list[ModelInfo]:
        """Every model the key may use, following `nextPageToken`."""
        models: list[ModelInfo] = []
        params: dict[str, Any] = {"pageSize": 1000}
        for _ in range(MAX_MODEL_PAGES):
            page = await self.get_json("/v1beta/models", params=params)
            entries = page.get("models")
            if isinstance(entries, list):
                models += [
                    model_info(e, provider=self.name) for e in entries if isinstance(e, dict)
                ]
            token = page.get("nextPageToken")
            if not token:
                break
            params = {"pageSize": 1000, "pageToken": token}
        return models

    async def health_check(self) -> bool:
        """True when the models list answers within a few seconds; never raises."""
        try:
            await self.send_json(
                "GET",
                "/v1beta/models",
                None,
                model="",
                params={"pageSize": 1},
                timeout=min(self.health_timeout_secs, self.config.timeout_secs),
            )
        except Exception:
            return False
        return True
