"""OpenRouter: the OpenAI provider pointed at https://openrouter.ai/api/v1.

Differences from OpenAI, all through the base class's hooks:

- `HTTP-Referer` (config `site_url`) and `X-Title` (config `app_name`) identify the app
  in OpenRouter's rankings when set.
- Requests ask for usage accounting (`"usage": {"include": true}`), and the cost
  OpenRouter reports in `usage.cost` (USD) becomes `ChatResponse.cost_usd` and the
  final `ChatChunk.cost_usd`.
- `max_tokens` keeps its name (OpenRouter's documented parameter).
- Its models list carries `context_length`, `architecture.input_modalities` ("image" →
  vision) and `supported_parameters` ("tools" → function calling).
"""

from __future__ import annotations

from typing import Any, ClassVar

from opencrab.config.providers import Price, ProviderFacts
from opencrab.llm.providers.openai import OpenAIOptions, OpenAIProvider
from opencrab.llm.types import ChatRequest, ModelInfo


class OpenRouterOptions(OpenAIOptions):
    """`[llm.providers.openrouter]` settings of OpenRouter's own (app attribution)."""

    site_url: str | None = None  # sent as HTTP-Referer
    app_name: str | None = None  # sent as X-Title


class OpenRouterProvider(OpenAIProvider):
    """Hundreds of models behind OpenRouter's OpenAI-compatible API."""

    name = "openrouter"
    facts = ProviderFacts(
        key_env="OPENROUTER_API_KEY",
        prices=(
            Price("free/*", 0.0, 0.0),  # and every ":free" variant
            # a routed id costs what its vendor charges (opencrab.llm.pricing, rule 2)
            Price("deepseek/deepseek-v3.2", 0.25, 0.38, 128_000, cache_read_per_1m=0.025),
        ),
        options=OpenRouterOptions,
        libraries=("openai",),
        extra="openai",
    )
    options: OpenRouterOptions
    default_base_url: ClassVar[str | None] = "https://openrouter.ai/api/v1"
    vendor_url: ClassVar[str | None] = default_base_url
    max_tokens_param: ClassVar[str] = "max_tokens"
    azure_capable: ClassVar[bool] = False

    def default_headers(self) -> dict[str, str]:
        """App attribution headers, when configured."""
        headers = {}
        if self.options.site_url:
            headers["HTTP-Referer"] = self.options.site_url
        if self.options.app_name:
            headers["X-Title"] = self.options.app_name
        return headers

    def extra_body(self, request: ChatRequest) -> dict[str, Any]:
        """Ask for usage accounting, which adds the cost to `usage`."""
        return {"usage": {"include": True}}

    def cost_from(self, raw_usage: dict[str, Any] | None) -> float | None:
        """`usage.cost` in USD, when present."""
        cost = (raw_usage or {}).get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            return float(cost)
        return None

    def model_info(self, raw: dict[str, Any]) -> ModelInfo:
        """A ModelInfo from one of OpenRouter's model objects."""
        architecture = raw.get("architecture") or {}
        modalities = architecture.get("input_modalities") or []
        parameters = raw.get("supported_parameters")
        window = raw.get("context_length")
        return ModelInfo(
            id=str(raw["id"]),
            provider=self.name,
            context_window=window if isinstance(window, int) else None,
            supports_vision="image" in modalities,
            supports_functions=parameters is None or "tools" in parameters,
        )
