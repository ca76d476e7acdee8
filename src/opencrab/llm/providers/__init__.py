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


def _lazy(module: str, attr: str, extra: str | None) -> Callable[..., LlmProvider]:
    def factory(config: ProviderConfig, *, name: str) -> LlmProvider:
        try:
            cls = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            hint = f" (pip install 'opencrab[{extra}]')" if extra else ""
            raise ProviderNotConfigured(
                f"its library is not installed: {exc.name or exc}{hint}", provider=name
            ) from exc
        provider: LlmProvider = cls(config, name=name)
        return provider

    return factory


@hookimpl
def register_providers(register: Callable[[str, Callable[..., Any]], None]) -> None:
    for name, (module, attr, extra) in BUILTINS.items():
        register(name, _lazy(module, attr, extra))
