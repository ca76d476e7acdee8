"""Built-in providers, registered through the same hook a plugin uses.

Each vendor module is imported only when its provider is built, so a missing optional
SDK affects only that provider.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from opencrab.config.models import ProviderConfig
from opencrab.errors import ProviderNotConfigured
from opencrab.llm.base import LlmProvider
from opencrab.plugins import hookimpl

BUILTINS = {
    "openai": ("opencrab.llm.providers.openai", "OpenAIProvider", "openai"),
    "anthropic": ("opencrab.llm.providers.anthropic", "AnthropicProvider", "anthropic"),
    "google": ("opencrab.llm.providers.google", "GoogleProvider", None),
    "openrouter": ("opencrab.llm.providers.openrouter", "OpenRouterProvider", "openai"),
    "ollama": ("opencrab.llm.providers.ollama", "OllamaProvider", None),
    "llamacpp": ("opencrab.llm.providers.llamacpp", "LlamaCppProvider", "openai"),
    "embedded": ("opencrab.llm.providers.embedded", "EmbeddedProvider", "local"),
}


class _Lazy:
    """A provider class imported when first needed; a missing SDK is ProviderNotConfigured."""

    def __init__(self, module: str, attr: str, extra: str | None) -> None:
        self.module, self.attr, self.extra = module, attr, extra

    def load(self, name: str) -> type[LlmProvider]:
        try:
            cls: type[LlmProvider] = getattr(importlib.import_module(self.module), self.attr)
        except ImportError as exc:
            hint = f" (pip install 'opencrab[{self.extra}]')" if self.extra else ""
            raise ProviderNotConfigured(
                f"its library is not installed: {exc.name or exc}{hint}", provider=name
            ) from exc
        return cls

    def __call__(self, config: ProviderConfig, *, name: str) -> LlmProvider:
        return self.load(name)(config, name=name)

    @property
    def vendor_url(self) -> str | None:
        """The class's `vendor_url` (None when its library is not installed)."""
        try:
            return self.load(self.attr).vendor_url
        except ProviderNotConfigured:
            return None


@hookimpl
def register_providers(register: Callable[[str, Callable[..., Any]], None]) -> None:
    for name, (module, attr, extra) in BUILTINS.items():
        register(name, _Lazy(module, attr, extra))
